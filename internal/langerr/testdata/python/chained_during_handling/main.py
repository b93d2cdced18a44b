d = {}
try:
    d["missing"]
except KeyError:
    raise RuntimeError("lookup failed")
