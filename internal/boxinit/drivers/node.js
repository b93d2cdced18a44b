// runbox session driver for JavaScript: one Node process, cells run as
// scripts of its main context, so top-level declarations and globals
// persist; a cell with top-level await is rewritten the way Node's REPL
// does it. runbox-init writes a JSON line per cell on descriptor 4
// ({"path", "stdin", "marker"}; "stdin" is 0: a cell reads no stdin); the
// cell ends with the marker on stdout,
// and on stderr the marker, the status and "\x1e".
'use strict';
const vm = require('vm');
const fs = require('fs');
const util = require('util');
const readline = require('readline');
// The driver's own references: a cell may replace what it can reach
// (JSON.parse = null, fs.writeSync = null), and the session must still
// take the next cell.
const { parse } = JSON;
const { writeSync, readFileSync, createReadStream } = fs;
const { inspect } = util;
const { Script } = vm;
const exit = process.exit.bind(process);
let processTopLevelAwait = null;
try { ({ processTopLevelAwait } = require('internal/repl/await')); } catch (e) { /* without --expose-internals */ }

let current = null; // { failed, interrupt }
function report(err) {
  let text;
  if (err instanceof Error || (err && typeof err.stack === 'string')) {
    text = inspect(err);
  } else {
    text = 'Uncaught ' + inspect(err);
  }
  writeSync(2, text + '\n');
}
process.on('uncaughtException', (err) => { report(err); if (current) current.failed = true; });
process.on('unhandledRejection', (err) => { report(err); if (current) current.failed = true; });
process.on('SIGINT', () => { if (current && current.interrupt) current.interrupt(); });

async function cell(path) {
  const source = readFileSync(path, 'utf8');
  let code = source;
  if (processTopLevelAwait && /\bawait\b/.test(source)) {
    try { new Script(source, { filename: path }); } catch (e) {
      const wrapped = processTopLevelAwait(source);
      if (wrapped !== null) code = wrapped;
    }
  }
  let script;
  try {
    script = new Script(code, { filename: path });
  } catch (e) {
    report(e);
    return 1;
  }
  const interrupted = new Promise((_, reject) => {
    current.interrupt = () => reject(new Error('Script execution was interrupted by `SIGINT`'));
  });
  try {
    const value = script.runInThisContext({ breakOnSigint: true, displayErrors: false });
    if (code !== source) await Promise.race([value, interrupted]);
  } catch (e) {
    report(e);
    return /interrupted by `SIGINT`/.test(String(e && e.message)) ? 130 : 1;
  }
  return current.failed ? 1 : 0;
}

const rl = readline.createInterface({ input: createReadStream(null, { fd: 4 }), crlfDelay: Infinity });
(async () => {
  for await (const line of rl) {
    const req = parse(line);
    current = { failed: false, interrupt: null };
    process.argv[1] = req.path;
    let status;
    try { status = await cell(req.path); } catch (e) { report(e); status = 1; }
    current = null;
    for (const [fd, s] of [[1, req.marker], [2, req.marker + status + '\x1e']]) {
      try { writeSync(fd, s); } catch (e) { /* closed by the cell */ }
    }
  }
  exit(0);
})();
