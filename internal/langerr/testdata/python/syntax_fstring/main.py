a = 1
print(f"{a b}")
