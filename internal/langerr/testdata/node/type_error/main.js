const user = null;
function greet(u) {
  return "hi " + u.name;
}
console.log(greet(user));
