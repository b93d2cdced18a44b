def check(rule):
    raise SyntaxError(f"bad rule: {rule}")

check("a ->")
