s = "😀😀"; v = None; w = (s, v["x"])
