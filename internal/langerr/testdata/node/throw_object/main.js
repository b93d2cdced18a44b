function f() {
  throw { code: 42, reason: "nope" };
}
f();
