function f() {
	if (true) {
		null.x;
	}
}
f();
