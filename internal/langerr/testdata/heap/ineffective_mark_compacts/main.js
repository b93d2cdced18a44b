// Many small arrays: on Node 18, GC frees too little near the limit.
const a = [];
for (;;) a.push(new Array(64).fill(0));
