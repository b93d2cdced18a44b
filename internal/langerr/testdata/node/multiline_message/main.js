throw new Error("first line\nsecond line");
