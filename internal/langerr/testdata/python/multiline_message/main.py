raise ValueError("first line\nsecond line\nthird line")
