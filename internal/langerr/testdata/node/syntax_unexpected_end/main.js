function f() {
  console.log("hi");

f();
