const fs = require("fs");
const helper = require("./helper");
console.log(helper.f());
