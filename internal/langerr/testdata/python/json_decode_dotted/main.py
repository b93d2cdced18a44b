import json

def load(s):
    return json.loads(s)

data = load("{bad json")
