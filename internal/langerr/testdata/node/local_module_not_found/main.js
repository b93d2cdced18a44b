// load a local helper
const h = require("./helpers/util");
