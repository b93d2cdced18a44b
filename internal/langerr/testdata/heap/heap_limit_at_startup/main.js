// V8 cannot even load its startup snapshot into a 1 MiB heap.
console.log("never printed");
