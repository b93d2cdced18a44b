const { execSync } = require("child_process");
execSync("true");
