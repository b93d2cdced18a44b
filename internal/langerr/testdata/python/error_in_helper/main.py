from helper import compute

values = [1, 2, 0]
total = compute(values)
print(total)
