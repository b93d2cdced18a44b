const fs = require("fs");
const fds = [];
for (let i = 0; i < 100; i++) fds.push(fs.openSync("/dev/null", "r"));
