def f(a):
	if a:
		y = a +* 2
