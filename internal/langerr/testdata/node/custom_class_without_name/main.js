class Oops extends Error {}
function run() {
  throw new Oops("bad thing");
}
run();
