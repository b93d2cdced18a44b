def compute(values):
    return sum(inv(v) for v in values)

def inv(v):
    return 1 / v
