const fs = require("fs");
const text = fs.readFileSync("/nope/data.txt", "utf8");
