try {
  JSON.parse("{");
} catch (err) {
  throw new Error("config is invalid", { cause: err });
}
