function check() {
  throw new Error();
}
check();
