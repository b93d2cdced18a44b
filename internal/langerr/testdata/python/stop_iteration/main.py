it = iter([])
value = next(it)
