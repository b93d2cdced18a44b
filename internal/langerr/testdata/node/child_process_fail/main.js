const { execSync } = require("child_process");
execSync("ls /nope");
