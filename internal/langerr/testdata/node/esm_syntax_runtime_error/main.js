import { readFileSync } from "fs";
const cfg = null;
console.log(cfg.port);
