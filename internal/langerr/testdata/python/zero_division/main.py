def div(a):
    return 1 // a

print("start")
div(0)
