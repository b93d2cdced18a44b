// A worker over its own resourceLimits is terminated: the main thread
// gets an ordinary error, and the process is no V8 casualty.
const { Worker } = require("worker_threads");
const w = new Worker("const a = []; for (;;) a.push(new Array(1e5).fill(1));", {
  eval: true,
  resourceLimits: { maxOldGenerationSizeMb: 16 },
});
w.on("exit", (code) => console.log("worker exited", code));
