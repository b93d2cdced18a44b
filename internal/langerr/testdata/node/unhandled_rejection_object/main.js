async function f() {
  throw { status: 500 };
}
f();
