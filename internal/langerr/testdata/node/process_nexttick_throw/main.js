process.nextTick(function later() {
	undefinedFunction();
});
