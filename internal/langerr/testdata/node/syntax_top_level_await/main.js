const sleep = (ms) => new Promise((r) => setTimeout(r, ms));
await sleep(10);
console.log("done");
