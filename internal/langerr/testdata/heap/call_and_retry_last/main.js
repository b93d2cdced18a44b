// A Map that outgrows the heap while it rehashes.
const m = new Map();
let i = 0;
for (;;) m.set(i++, { v: i });
