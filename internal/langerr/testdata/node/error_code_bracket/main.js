const path = require("path");
path.join(null);
