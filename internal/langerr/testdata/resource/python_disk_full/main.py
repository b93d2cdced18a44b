with open("/dev/full", "w") as f:
    f.write("x" * 10000)
