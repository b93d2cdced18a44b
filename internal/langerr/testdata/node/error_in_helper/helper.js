exports.compute = function (values) {
  return values.map((v) => v.toFixed(2).padStart(-1).foo.bar);
};
