with open("big.bin", "wb") as f:
    f.write(b"x" * 100000)
