exports.f = function () {
  return 1 +;
};
