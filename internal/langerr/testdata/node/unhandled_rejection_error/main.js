async function load() {
  await null;
  throw new Error("load failed");
}
load();
