expr = "1 +* 2"
print(eval(expr))
