const fn = new Function("a", "return a +* 2");
