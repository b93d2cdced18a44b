const { compute } = require("./helper");

const values = [1, 2, 3];
console.log(compute(values));
