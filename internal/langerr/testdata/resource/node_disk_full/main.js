const fs = require("fs");
fs.writeFileSync("/dev/full", "x".repeat(10000));
