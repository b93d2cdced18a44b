console.log("before");
console.error("a warning on stderr");
const total = count + 1;
