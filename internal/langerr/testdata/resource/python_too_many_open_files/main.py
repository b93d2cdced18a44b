files = [open("/dev/null") for _ in range(100)]
