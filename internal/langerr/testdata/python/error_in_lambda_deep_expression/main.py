data = {"a": {"b": None}}
value = data["a"]["b"]["c"]
