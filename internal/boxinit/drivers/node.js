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
let processTopLevelAwait = null;
try { ({ processTopLevelAwait } = require('internal/repl/await')); } catch (e) { /* without --expose-internals */ }

let current = null; // { failed, interrupt }
function report(err) {
  let text;
  if (err instanceof Error || (err && typeof err.stack === 'string')) {
    text = util.inspect(err);
  } else {
    text = 'Uncaught ' + util.inspect(err);
  }
  fs.writeSync(2, text + '\n');
}
process.on('uncaughtException', (err) => { report(err); if (current) current.failed = true; });
process.on('unhandledRejection', (err) => { report(err); if (current) current.failed = true; });
process.on('SIGINT', () => { if (current && current.interrupt) current.interrupt(); });

async function cell(path) {
  const source = fs.readFileSync(path, 'utf8');
  let code = source;
  if (processTopLevelAwait && /\bawait\b/.test(source)) {
    try { new vm.Script(source, { filename: path }); } catch (e) {
      const wrapped = processTopLevelAwait(source);
      if (wrapped !== null) code = wrapped;
    }
  }
  let script;
  try {
    script = new vm.Script(code, { filename: path });
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

const rl = readline.createInterface({ input: fs.createReadStream(null, { fd: 4 }), crlfDelay: Infinity });
(async () => {
  for await (const line of rl) {
    const req = JSON.parse(line);
    current = { failed: false, interrupt: null };
    process.argv[1] = req.path;
    let status;
    try { status = await cell(req.path); } catch (e) { report(e); status = 1; }
    current = null;
    for (const [fd, s] of [[1, req.marker], [2, req.marker + status + '\x1e']]) {
      try { fs.writeSync(fd, s); } catch (e) { /* closed by the cell */ }
    }
  }
  process.exit(0);
})();
