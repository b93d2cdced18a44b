async function main() {
  const res = await Promise.resolve(undefined);
  return res.data.items;
}
main();
