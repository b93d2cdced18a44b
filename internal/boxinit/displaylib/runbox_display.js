// runbox's displays in the box for Node (preloaded with --require): a
// global display(bundleOrValue) and console.table as a table display.
// Each display is a directory of the spool with its mimes' data and then
// display.json; a mark on stdout says where it falls in the output.
'use strict';
const fs = require('fs');
const path = require('path');
const util = require('util');

const SPOOL = '/tmp/.runbox/displays';
const MARK = (name) => '\x1b]5379;runbox-display;' + name + '\x07';
const NAMES = {
  'image/png': 'image.png', 'image/jpeg': 'image.jpg', 'image/svg+xml': 'image.svg',
  'text/html': 'index.html', 'text/markdown': 'text.md', 'text/latex': 'text.tex',
  'text/plain': 'text.txt', 'application/json': 'data.json',
  'application/vnd.runbox.table+json': 'table.json',
};
const TABLE_ROWS = 1000, TABLE_COLUMNS = 100, CELL_CHARS = 1000;
let seq = 0;

function emit(bundle, source) {
  const name = process.pid + '-' + (++seq);
  const dir = path.join(SPOOL, name);
  try {
    fs.mkdirSync(dir);
    const mimes = {};
    for (const [mime, value] of Object.entries(bundle)) {
      if (!NAMES[mime] || value === undefined || value === null) continue;
      let data;
      if (Buffer.isBuffer(value) || value instanceof Uint8Array) data = Buffer.from(value);
      else if (typeof value === 'string') {
        // Images come base64-encoded in a bundle, as in a notebook's.
        data = (mime === 'image/png' || mime === 'image/jpeg') ? Buffer.from(value, 'base64') : Buffer.from(value, 'utf8');
      } else data = Buffer.from(JSON.stringify(value) ?? 'null', 'utf8');
      fs.writeFileSync(path.join(dir, NAMES[mime]), data);
      mimes[mime] = NAMES[mime];
    }
    fs.writeFileSync(path.join(dir, 'display.json'), JSON.stringify({ source, mimes }));
  } catch (e) {
    try { fs.rmSync(dir, { recursive: true, force: true }); } catch (e2) { /* the space is the program's */ }
    process.stderr.write('runbox: display not kept: ' + e.message + '\n');
    return;
  }
  try {
    fs.writeSync(1, MARK(name));
  } catch (e) { /* stdout closed */ }
}

function cell(v) {
  if (v === null || v === undefined) return null;
  if (typeof v === 'number') return Number.isFinite(v) ? v : null;
  if (typeof v === 'boolean') return v;
  if (typeof v === 'bigint') return v.toString();
  const s = typeof v === 'string' ? v : util.inspect(v, { depth: 1, breakLength: Infinity });
  return s.length <= CELL_CHARS ? s : s.slice(0, CELL_CHARS) + '…';
}

// table is console.table's data as a table display: one row per entry,
// one column per property (or "Values" for primitives), as Node prints it.
function table(data, properties) {
  const entries = Array.isArray(data) ? data.map((v, i) => [i, v]) : Object.entries(data);
  const columns = [];
  const seen = new Set();
  let values = false;
  for (const [, v] of entries) {
    if (v !== null && typeof v === 'object') {
      for (const k of Object.keys(v)) if (!seen.has(k)) { seen.add(k); columns.push(k); }
    } else values = true;
  }
  let cols = Array.isArray(properties) ? properties.map(String) : columns;
  if (values) cols = cols.concat(['Values']);
  const kept = cols.slice(0, TABLE_COLUMNS);
  const rows = entries.slice(0, TABLE_ROWS).map(([, v]) => kept.map((k) => {
    if (k === 'Values' && values && (v === null || typeof v !== 'object')) return cell(v);
    return v !== null && typeof v === 'object' && Object.prototype.hasOwnProperty.call(v, k) ? cell(v[k]) : null;
  }));
  const t = { columns: kept, index: entries.slice(0, TABLE_ROWS).map(([k]) => cell(k)), rows, shape: [entries.length, cols.length] };
  if (entries.length > TABLE_ROWS || cols.length > TABLE_COLUMNS) {
    t.cut = `kept ${Math.min(entries.length, TABLE_ROWS)} of ${entries.length} rows and ${kept.length} of ${cols.length} columns`;
  }
  return t;
}

function isBundle(v) {
  return v !== null && typeof v === 'object' && !Array.isArray(v) && !Buffer.isBuffer(v) &&
    Object.keys(v).length > 0 && Object.keys(v).every((k) => k.includes('/'));
}

// display shows each value: a mime bundle ({"image/png": base64, ...}) as
// it is, any other value by its text as console.log prints it.
function display(...values) {
  for (const v of values) {
    if (isBundle(v)) emit(v, 'display');
    else emit({ 'text/plain': typeof v === 'string' ? v : util.inspect(v) }, 'display');
  }
}

Object.defineProperty(globalThis, 'display', { value: display, writable: true, configurable: true });
const printTable = console.table.bind(console);
console.table = function (data, properties) {
  printTable(data, properties);
  if (data !== null && typeof data === 'object') {
    try { emit({ 'application/vnd.runbox.table+json': table(data, properties) }, 'table'); } catch (e) { /* not tabular */ }
  }
};
