throw "line one\nline two";
