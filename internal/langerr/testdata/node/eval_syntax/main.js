const src = "let x = ;";
eval(src);
