class LimitError(Exception):
    pass

def check(n):
    if n > 3:
        raise LimitError(f"{n} is over the limit")
