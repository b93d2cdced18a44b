try:
    raise ValueError("bad value")
except ValueError as e:
    e.add_note("while parsing row 3")
    e.add_note("check the input file")
    raise
