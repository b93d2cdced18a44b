const a = 1;
const b = ;
console.log(a, b);
