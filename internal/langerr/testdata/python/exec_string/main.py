src = "x = 1\ny = x / 0\n"
exec(src)
