// runbox session driver for JavaScript: one Node process, cells run as
// scripts of its main context, so top-level declarations and globals
// persist; a cell with top-level await is rewritten the way Node's REPL
// does it. runbox-init writes a JSON line per cell on descriptor 4
// ({"path", "stdin", "marker"}) and then the cell's stdin, "stdin" bytes of
// it; the cell ends with the marker on stdout, and on stderr the marker,
// the status and "\x1e".
//
// A cell's stdin is its own: process.stdin is a stream of those bytes, and
// fs.readFileSync of descriptor 0 or /dev/stdin reads them (Node cannot
// replace its descriptor 0, which stays the driver's).
//
// A cell ends where `node main.js` would exit, with the status it would
// exit with: once the event loop has no more work for it (the request
// pipe does not keep the loop alive while a cell runs), at its first
// uncaught exception or unhandled rejection (1), or at process.exit(n)
// (n). A cell that ends early has its timers cleared and the handles it
// left (sockets, servers, child processes) closed, as the process's end
// would; its declarations stay.
//
// All of the driver is inside a function: a script's top-level const and
// let are the whole context's, and a cell must be free to declare fs or
// current itself.
(function driver() {
  'use strict';
  const vm = require('vm');
  const fs = require('fs');
  const net = require('net');
  const util = require('util');
  const timers = require('timers');
  const { Readable } = require('stream');
  const { executionAsyncId, AsyncResource } = require('async_hooks');
  // The driver's own references: a cell may replace what it can reach
  // (JSON.parse = null, fs.writeSync = null), and the session must still
  // take the next cell.
  const { parse } = JSON;
  const bufferFrom = Buffer.from.bind(Buffer);
  const { wait } = Atomics;
  const { writeSync, readFileSync } = fs;
  const { inspect } = util;
  const { Script } = vm;
  const { setTimeout, setInterval, setImmediate, clearTimeout, clearInterval, clearImmediate } = timers;
  const activeHandles = process._getActiveHandles.bind(process);
  const driverExit = process.exit.bind(process);
  const stdio = [process.stdout, process.stderr];
  let processTopLevelAwait = null;
  try { ({ processTopLevelAwait } = require('internal/repl/await')); } catch (e) { /* without --expose-internals */ }
  // A TypeScript session names its runner (initproto.TypeScriptRunner):
  // each cell is type-checked against the earlier ones, then transpiled,
  // and runs as a JavaScript cell. The compiler stays loaded between
  // cells.
  const tsRunner = process.argv[1] && /runbox_ts\.js$/.test(process.argv[1]) ? require(process.argv[1]) : null;
  const tsSession = tsRunner ? new tsRunner.Session() : null;
  const tsCheck = tsRunner ? tsRunner.typeCheck() : false;
  if (tsRunner) {
    delete process.env.RUNBOX_TS_TYPE_CHECK;
    try { tsRunner.warm(tsSession.checker); } catch (e) { /* the first cell's check reports it */ }
  }

  // current is the running cell: { marker, timers, awaited, interrupt,
  // first }.
  let current = null;

  // Async ids grow: what a cell starts (a tick, a child, a socket) has an
  // id from its first on. firstCell is the first cell's first, or 0.
  function newestAsyncId() {
    return new AsyncResource('RUNBOX_CELL').asyncId();
  }
  let firstCell = 0;

  // writeAll writes all of s to fd. Node leaves a pipe's descriptor
  // non-blocking: a write to a full pipe (a slow reader) fails with EAGAIN
  // or writes part, so it waits a millisecond and writes the rest. A
  // descriptor the cell closed takes nothing more.
  const pause = new Int32Array(new SharedArrayBuffer(4));
  function writeAll(fd, s) {
    let buf = bufferFrom(s);
    while (buf.length > 0) {
      try {
        buf = buf.subarray(writeSync(fd, buf));
      } catch (e) {
        if (e.code !== 'EAGAIN') return;
        wait(pause, 0, 0, 1);
      }
    }
  }

  function report(err) {
    let text;
    if (err instanceof Error || (err && typeof err.stack === 'string')) {
      text = inspect(err);
    } else {
      text = 'Uncaught ' + inspect(err);
    }
    if (current && current.map) text = tsRunner.mapStack(text, current.path, current.map);
    writeAll(2, text + '\n');
  }

  // process.exit in a cell ends the cell, not the session: thrown, it stops
  // the code where it stands, as the process's exit would.
  class CellExit {
    constructor(code) { this.code = code; }
  }
  process.exit = function exit(code) {
    if (code === undefined) code = process.exitCode;
    throw new CellExit((Number(code) | 0) & 0xff);
  };

  // Timers a cell starts are its own: cleared when it ends.
  function tracked(start, clear) {
    return function (...args) {
      const t = start(...args);
      if (current) current.timers.push([t, clear]);
      return t;
    };
  }
  globalThis.setTimeout = timers.setTimeout = tracked(setTimeout, clearTimeout);
  globalThis.setInterval = timers.setInterval = tracked(setInterval, clearInterval);
  globalThis.setImmediate = timers.setImmediate = tracked(setImmediate, clearImmediate);

  // fail ends the cell at an exception that reached the top. Between
  // cells there is no cell to end.
  function fail(err) {
    if (!current) return;
    if (err instanceof CellExit) {
      end(err.code, true);
      return;
    }
    report(err);
    end(1, true);
  }
  // An exception from what an ended cell started has no cell to end, nor
  // an output of its own: it is dropped. The failed spawns of a cell that
  // ended at the first of them report theirs after it, and Node runs the
  // ticks left after an uncaught exception a loop turn later, when the
  // next cell may have started. One thrown where no earlier cell's async
  // id runs (the driver's own callbacks) is the running cell's; so is a
  // rejection, whose handler runs with no id of its own.
  process.on('uncaughtException', (err) => {
    const id = executionAsyncId();
    if (firstCell > 0 && current && id >= firstCell && id < current.first) return;
    fail(err);
  });
  process.on('unhandledRejection', fail);
  process.on('SIGINT', () => { if (current && current.interrupt) current.interrupt(); });
  // The loop has no more work: a cell ends as the process would exit.
  process.on('beforeExit', () => {
    if (!current) return;
    if (current.awaited === 'pending') {
      writeAll(2, 'Warning: Detected unsettled top-level await\n');
      end(13, false);
      return;
    }
    end(process.exitCode === undefined ? 0 : (Number(process.exitCode) | 0) & 0xff, false);
  });

  const ctl = new net.Socket({ fd: 4, readable: true, writable: false });

  // endTunnels ends fetch's tunnels through runbox's proxy (the proxy
  // module's, in NODE_OPTIONS when the network is on): runbox-init's proxy
  // closes them once the call is over, and the next cell must not take up
  // one whose close this loop has not seen yet.
  function endTunnels() {
    const f = globalThis[Symbol.for('runbox.proxy.endTunnels')];
    if (typeof f !== 'function') return;
    try { f(); } catch (e) { /* a cell replaced it */ }
  }

  // end ends the running cell with status; early, what it left running is
  // stopped. Either way its tunnels through the proxy end, as the
  // process's exit would end them.
  function end(status, early) {
    const cell = current;
    if (!cell) return;
    current = null;
    process.exitCode = undefined;
    for (const [t, clear] of cell.timers) clear(t);
    endTunnels();
    if (early) {
      for (const h of activeHandles()) {
        if (h === ctl || stdio.includes(h)) continue;
        try {
          if (typeof h.kill === 'function') {
            // A child whose spawn failed (EAGAIN at the pids limit) has no
            // pid: its kill would be kill(0, SIGKILL), the whole process
            // group, the interpreter with it.
            if (h.pid > 0) h.kill('SIGKILL');
            else if (h._handle && typeof h._handle.close === 'function') h._handle.close();
          } else if (typeof h.destroy === 'function') h.destroy();
          else if (typeof h.close === 'function') h.close();
        } catch (e) { /* already closing */ }
      }
    }
    for (const [fd, s] of [[1, cell.marker], [2, cell.marker + status + '\x1e']]) {
      writeAll(fd, s);
    }
    ctl.ref();
    setImmediate(next);
  }

  // cellStdin gives the cell its stdin: a fresh process.stdin over data,
  // and data for a read of descriptor 0 or /dev/stdin as a whole.
  let stdinData = Buffer.alloc(0);
  let stdinStream = null;
  Object.defineProperty(process, 'stdin', {
    configurable: true,
    enumerable: true,
    get() {
      if (!stdinStream) {
        stdinStream = new Readable({ read() {} });
        stdinStream.fd = 0;
        stdinStream.isTTY = false;
        stdinStream.push(stdinData);
        stdinStream.push(null);
      }
      return stdinStream;
    },
  });
  function isStdin(f) {
    return f === 0 || f === '/dev/stdin' || f === '/proc/self/fd/0';
  }
  fs.readFileSync = function (file, options) {
    if (current && isStdin(file)) {
      const enc = typeof options === 'string' ? options : options && options.encoding;
      return enc ? stdinData.toString(enc) : Buffer.from(stdinData);
    }
    return readFileSync.apply(fs, arguments);
  };
  function cellStdin(data) {
    if (stdinStream) stdinStream.destroy();
    stdinStream = null;
    stdinData = data;
  }

  function start(req, data) {
    cellStdin(data);
    current = { marker: req.marker, timers: [], awaited: null, interrupt: null, first: newestAsyncId() };
    if (firstCell === 0) firstCell = current.first;
    process.argv[1] = req.path;
    process.exitCode = undefined;
    // The request pipe keeps the loop alive between cells only.
    ctl.unref();
    const cell = current;
    let source;
    try {
      source = readFileSync(req.path, 'utf8');
    } catch (e) {
      fail(e);
      return;
    }
    if (tsSession && tsCheck && tsSession.tools === null && /runbox_tools/.test(source)) {
      // The first cell that mentions runbox_tools waits for its
      // declarations (runbox-init's answer, or `any`), kept for the
      // session; it runs from a plain callback, as any cell does.
      tsRunner.typings(source).then((d) => {
        tsSession.tools = d;
        process.nextTick(() => { if (current === cell) run(req, cell, source); });
      });
      return;
    }
    run(req, cell, source);
  }

  // run compiles a cell's source (TypeScript: checks and transpiles it)
  // and runs it.
  function run(req, cell, source) {
    let code = source;
    if (tsSession) {
      let out;
      try {
        out = tsSession.cell(req.path, source, tsCheck);
      } catch (e) {
        fail(e);
        return;
      }
      if (out.error !== undefined) {
        writeAll(2, out.error);
        end(1, false);
        return;
      }
      code = out.js;
      cell.map = out.map;
      cell.path = req.path;
    }
    const js = code;
    if (processTopLevelAwait && /\bawait\b/.test(js)) {
      try { new Script(js, { filename: req.path }); } catch (e) {
        const wrapped = processTopLevelAwait(js);
        if (wrapped !== null) code = wrapped;
      }
    }
    let script;
    try {
      script = new Script(code, { filename: req.path });
    } catch (e) {
      fail(e);
      return;
    }
    cell.interrupt = () => {
      report(new Error('Script execution was interrupted by `SIGINT`'));
      end(130, true);
    };
    let value;
    try {
      value = script.runInThisContext({ breakOnSigint: true, displayErrors: false });
    } catch (e) {
      if (/interrupted by `SIGINT`/.test(String(e && e.message))) {
        report(e);
        end(130, true);
        return;
      }
      fail(e);
      return;
    }
    if (code !== js && current === cell) {
      // The rewritten cell's promise: its rejection is the cell's error, as
      // a module's top-level await's would be.
      cell.awaited = 'pending';
      Promise.resolve(value).then(() => { cell.awaited = 'settled'; }, (e) => {
        cell.awaited = 'settled';
        if (current === cell) fail(e);
      });
    }
  }

  // The request pipe carries a JSON line per cell, then its stdin bytes.
  const requests = [];
  let buffered = Buffer.alloc(0);
  let want = null;
  ctl.on('data', (chunk) => {
    buffered = Buffer.concat([buffered, chunk]);
    for (;;) {
      if (want === null) {
        const i = buffered.indexOf(10);
        if (i < 0) break;
        const line = buffered.subarray(0, i).toString('utf8');
        buffered = buffered.subarray(i + 1);
        if (line.trim() === '') continue;
        try { want = parse(line); } catch (e) { continue; }
        if (!(want.stdin > 0)) want.stdin = 0;
      }
      if (buffered.length < want.stdin) break;
      requests.push([want, Buffer.from(buffered.subarray(0, want.stdin))]);
      buffered = buffered.subarray(want.stdin);
      want = null;
    }
    next();
  });
  ctl.on('end', () => driverExit(0));
  ctl.on('error', () => driverExit(0));

  function next() {
    if (current || requests.length === 0) return;
    const [req, data] = requests.shift();
    start(req, data);
  }
})();
