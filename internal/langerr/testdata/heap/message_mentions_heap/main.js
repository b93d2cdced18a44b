// The words alone are no sign: V8 prints them at the start of a line.
throw new Error("FATAL ERROR: Reached heap limit Allocation failed - JavaScript heap out of memory");
