console.log("scheduling");
setTimeout(() => {
  const parts = "a,b".split(",");
  parts.get(0);
}, 5);
