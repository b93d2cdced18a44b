x = 1
msg = "hello
print(msg)
