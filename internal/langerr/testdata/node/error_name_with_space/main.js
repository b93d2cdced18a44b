const e = new Error("disk is on fire");
e.name = "Fatal Error";
throw e;
