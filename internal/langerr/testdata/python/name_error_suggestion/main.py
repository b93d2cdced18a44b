counter = 0
for i in range(3):
    countr += i
