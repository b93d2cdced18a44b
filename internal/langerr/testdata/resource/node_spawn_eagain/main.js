const { spawn } = require("child_process");
for (let i = 0; i < 50; i++) spawn("sleep", ["2"]);
