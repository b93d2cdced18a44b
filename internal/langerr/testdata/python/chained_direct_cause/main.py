def parse(s):
    try:
        return int(s)
    except ValueError as e:
        raise TypeError(f"bad number {s!r}") from e

parse("x1")
