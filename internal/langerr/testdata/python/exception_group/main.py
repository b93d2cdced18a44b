def run():
    raise ExceptionGroup("several failed", [ValueError("a"), TypeError("b")])

run()
