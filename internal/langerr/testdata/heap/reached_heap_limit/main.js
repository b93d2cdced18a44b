const a = [];
for (;;) a.push(new Array(1e6).fill(1));
