// runbox's TypeScript runner: type-checks a program with the image's
// TypeScript compiler, transpiles it to CommonJS with a source map and runs
// it in this Node process, so that errors name the program's own lines.
//
//   node runbox_ts.js FILE         check, then run FILE
//   node runbox_ts.js --prestart   load the compiler and its libraries, then
//                                  read FILE's path on descriptor 4 (a
//                                  pooled box, whose job is on its way)
//
// A program that does not type-check never runs: its first error is
// reported in the shape of Node's report of a syntax error (the file and
// line, the source line, a caret, "TS2322: message"), and the others
// follow. RUNBOX_TS_TYPE_CHECK=0 (a language's type_check: false) skips
// the check: the program is transpiled and run as it is.
//
// Session drivers require() this file for its compiler (exports below).
'use strict';

const fs = require('fs');
const path = require('path');
const Module = require('module');

// The image's Node packages (images/sandbox/npm.txt).
const NODE_MODULES = '/usr/lib/node_modules';
const TOOLS_SOCKET = '/tmp/.runbox/tools.sock';
const TOOLS_TYPINGS = '/tmp/.runbox/runbox_tools.d.ts';
// What runbox_tools is when runbox-init has no declarations for it.
const TOOLS_FALLBACK = 'declare module "runbox_tools" { const tools: any; export = tools; }\n';

let ts = null;
function compiler() {
  if (!ts) ts = require(path.join(NODE_MODULES, 'typescript'));
  return ts;
}

// Top-level await in a CommonJS program is valid here (the runner wraps
// it), so the compiler's complaints about it are not the program's
// errors.
const IGNORED = new Set([1375, 1378, 1431, 1432, 2821]);

function checkOptions() {
  const t = compiler();
  return {
    target: t.ScriptTarget.ES2022,
    module: t.ModuleKind.CommonJS,
    moduleResolution: t.ModuleResolutionKind.Node10,
    moduleDetection: t.ModuleDetectionKind.Force,
    lib: ['lib.es2022.d.ts'],
    types: ['node'],
    typeRoots: [path.join(NODE_MODULES, '@types')],
    strict: true,
    // Scripts call untyped packages and write untyped parameters.
    noImplicitAny: false,
    esModuleInterop: true,
    resolveJsonModule: true,
    skipLibCheck: true,
    noEmit: true,
  };
}

function emitOptions() {
  const t = compiler();
  return {
    target: t.ScriptTarget.ES2022,
    module: t.ModuleKind.CommonJS,
    moduleDetection: t.ModuleDetectionKind.Force,
    esModuleInterop: true,
    strict: true,
    sourceMap: true,
    inlineSources: true,
  };
}

// libFiles are the image's declaration files, parsed once: they never
// change, and parsing them is most of a check's cost.
const libFiles = new Map();

// Checker type-checks programs of a root file whose text it is given,
// against the image's libraries, reusing the last program's structure.
class Checker {
  constructor() {
    this.options = checkOptions();
    this.old = undefined;
    this.texts = new Map(); // in-memory files: path -> text
  }

  host() {
    const t = compiler();
    const h = t.createCompilerHost(this.options, true);
    const texts = this.texts;
    h.getSourceFile = (fileName, langVersion) => {
      const text = texts.get(fileName);
      if (text !== undefined) return t.createSourceFile(fileName, text, langVersion, true);
      const key = fileName + '\0' + JSON.stringify(langVersion);
      let sf = libFiles.get(key);
      if (sf) return sf;
      const body = t.sys.readFile(fileName);
      if (body === undefined) return undefined;
      sf = t.createSourceFile(fileName, body, langVersion, false);
      if (fileName.startsWith(NODE_MODULES + '/')) libFiles.set(key, sf);
      return sf;
    };
    h.fileExists = (f) => texts.has(f) || t.sys.fileExists(f);
    h.readFile = (f) => (texts.has(f) ? texts.get(f) : t.sys.readFile(f));
    h.getDefaultLibLocation = () => path.join(NODE_MODULES, 'typescript', 'lib');
    h.getDefaultLibFileName = (o) => path.join(NODE_MODULES, 'typescript', 'lib', t.getDefaultLibFileName(o));
    return h;
  }

  // check returns the errors of file (whose text is text) and of the
  // program's other files of its own, not the libraries'.
  check(file, text, extra) {
    const t = compiler();
    this.texts = new Map([[file, text], ...(extra || [])]);
    const program = t.createProgram({ rootNames: [...this.texts.keys()], options: this.options, host: this.host(), oldProgram: this.old });
    this.old = program;
    const own = program.getSourceFiles().filter((sf) => !sf.isDeclarationFile && !sf.fileName.startsWith(NODE_MODULES + '/'));
    let diags = [];
    for (const sf of own) diags.push(...program.getSyntacticDiagnostics(sf));
    if (diags.length === 0) {
      diags.push(...program.getGlobalDiagnostics());
      for (const sf of own) diags.push(...program.getSemanticDiagnostics(sf));
    }
    diags = diags.filter((d) => d.category === t.DiagnosticCategory.Error && !IGNORED.has(d.code));
    return diags;
  }
}

// transpile turns TypeScript into CommonJS and its source map (an object).
function transpile(file, text) {
  const t = compiler();
  const out = t.transpileModule(text, { fileName: file, compilerOptions: emitOptions(), reportDiagnostics: false });
  const map = JSON.parse(out.sourceMapText);
  map.sources = [file];
  map.sourcesContent = [text];
  map.file = file;
  const js = out.outputText.replace(/\n\/\/# sourceMappingURL=.*\s*$/, '\n');
  return { js, map };
}

// hasTopLevelAwait says whether sf awaits outside any function.
function hasTopLevelAwait(sf) {
  const t = compiler();
  let found = false;
  const visit = (n) => {
    if (found) return;
    if (t.isFunctionLike(n) || t.isClassLike(n)) return;
    if (t.isAwaitExpression(n) || (t.isForOfStatement(n) && n.awaitModifier)) { found = true; return; }
    t.forEachChild(n, visit);
  };
  t.forEachChild(sf, visit);
  return found;
}

// runnable is the JavaScript that runs file: the transpiled program with
// its inline source map; with top-level await, inside an async function.
// The wrapper takes a
// line of its own, which the map's leading ";" skips.
function runnable(file, text) {
  const { js, map } = transpile(file, text);
  const sf = compiler().createSourceFile(file, text, compiler().ScriptTarget.ES2022, false);
  let code = js;
  if (hasTopLevelAwait(sf)) {
    // Its rejection is unhandled, reported as Node reports an ES
    // module's failed top-level await: with the error's own stack.
    code = '(async () => {\n' + js + '\n})();\n';
    map.mappings = ';' + map.mappings;
  }
  return code + '//# sourceMappingURL=data:application/json;base64,' + Buffer.from(JSON.stringify(map)).toString('base64') + '\n';
}

// position is a diagnostic's 1-based line and 0-based UTF-16 column.
function position(d) {
  if (!d.file || d.start === undefined) return null;
  const { line, character } = d.file.getLineAndCharacterOfPosition(d.start);
  return { line: line + 1, character };
}

function message(d) {
  return compiler().flattenDiagnosticMessageText(d.messageText, '\n').split('\n').map((s) => s.trim()).filter(Boolean).join(' ');
}

// report is the text of diags: the first in the shape of Node's report of
// a syntax error, with the count of the others in its message, then one
// line for each of the others ("file:line:column - TS1234: message").
// lineOffset and file, when given, say where the checked text's lines
// start in what the caller submitted (a session's cell).
function report(diags, lineOffset, file) {
  lineOffset = lineOffset || 0;
  const lines = [];
  const where = (d) => {
    const p = position(d);
    if (!p) return { name: file || '', line: 0, character: 0 };
    return { name: file || d.file.fileName, line: p.line - lineOffset, character: p.character };
  };
  const first = diags[0];
  const w = where(first);
  let msg = message(first);
  if (diags.length > 1) msg += ' (first of ' + diags.length + ' type errors; all are listed below)';
  if (w.line > 0) {
    const src = first.file.text.split('\n')[w.line + lineOffset - 1] || '';
    lines.push(w.name + ':' + w.line, src.replace(/\r$/, ''), ' '.repeat(w.character) + '^', '');
  }
  lines.push('TS' + first.code + ': ' + msg);
  const shown = diags.slice(1, 50);
  for (const d of shown) {
    const v = where(d);
    lines.push((v.line > 0 ? v.name + ':' + v.line + ':' + (v.character + 1) + ' - ' : '') + 'TS' + d.code + ': ' + message(d));
  }
  if (diags.length > 1 + shown.length) lines.push('... and ' + (diags.length - 1 - shown.length) + ' more');
  return lines.join('\n') + '\n';
}

// typings asks runbox-init for the declarations of runbox_tools (the
// box's tool servers) when text mentions it (null when not): a promise of
// the declarations' text; without an answer, runbox_tools is `any`.
function typings(text) {
  if (!/runbox_tools/.test(text)) return null;
  if (!fs.existsSync(TOOLS_SOCKET)) return Promise.resolve(TOOLS_FALLBACK);
  return new Promise((resolve) => {
    const net = require('net');
    const chunks = [];
    let done = false;
    const finish = (v) => { if (!done) { done = true; resolve(v); } };
    const s = net.createConnection(TOOLS_SOCKET);
    s.setTimeout(10000, () => { s.destroy(); finish(TOOLS_FALLBACK); });
    s.on('connect', () => s.end(JSON.stringify({ op: 'typings', language: 'typescript' })));
    s.on('data', (c) => chunks.push(c));
    s.on('error', () => finish(TOOLS_FALLBACK));
    s.on('close', () => {
      try {
        const a = JSON.parse(Buffer.concat(chunks).toString('utf8'));
        finish(a && a.ok === true && typeof a.text === 'string' ? a.text : TOOLS_FALLBACK);
      } catch (e) {
        finish(TOOLS_FALLBACK);
      }
    });
  });
}

// typeCheck is whether programs are checked before they run.
function typeCheck(env) {
  return (env || process.env).RUNBOX_TS_TYPE_CHECK !== '0';
}

// registerTs lets the program require() its own .ts files: transpiled, not
// checked (the program's check covered those it imports).
function registerTs() {
  Module._extensions['.ts'] = function (m, filename) {
    m._compile(runnable(filename, fs.readFileSync(filename, 'utf8')), filename);
  };
}

// warm loads the compiler and parses the libraries with checks of small
// programs, so that the first real check pays for neither. The checks
// name the workspace's main.ts, as the program will (the next program
// then reuses the last one's structure: its module resolution), and there
// are three: the compiler's own code runs cold in the first ones, which
// took 100 times as long as the third.
function warm(checker) {
  const file = path.join(process.cwd(), 'main.ts');
  for (let i = 0; i < 3; i++) {
    checker.check(file, 'const n: number = ' + i + ';\nconsole.log(n, process.argv.length);\n');
  }
}

// runMain checks and runs file as the program's main module.
function runMain(file, checker) {
  let text;
  try {
    text = fs.readFileSync(file, 'utf8');
  } catch (e) {
    process.stderr.write('runbox: cannot read ' + file + ': ' + e.message + '\n');
    process.exitCode = 2;
    return;
  }
  const check = typeCheck();
  delete process.env.RUNBOX_TS_TYPE_CHECK;
  if (!check) {
    execute(file, text);
    return;
  }
  const checked = (decls) => {
    const diags = checker.check(file, text, decls === null ? [] : [[TOOLS_TYPINGS, decls]]);
    if (diags.length > 0) {
      process.stderr.write(report(diags));
      process.exitCode = 1;
      return;
    }
    execute(file, text);
  };
  // The program runs from a plain callback, never inside a promise: what
  // it throws is an uncaught exception, reported as Node reports it.
  const asked = typings(text);
  if (asked === null) checked(null);
  else asked.then((d) => process.nextTick(checked, d));
}

// execute runs the program as the main module, as `node FILE` would.
function execute(file, text) {
  process.setSourceMapsEnabled(true);
  registerTs();
  const m = new Module(file, null);
  m.filename = file;
  m.id = '.';
  m.paths = Module._nodeModulePaths(path.dirname(file));
  process.mainModule = m;
  Module._cache[file] = m;
  m._compile(runnable(file, text), file);
  m.loaded = true;
}

// requireImports is a transformer that turns a cell's imports into
// require() calls bound to the imported names, with no module transform:
// a session's cells are scripts of one context, and a later cell uses the
// names an earlier one imported.
let imports = 0;
function requireImports(context) {
  const t = compiler();
  const f = context.factory;
  const req = (spec) => f.createCallExpression(f.createIdentifier('require'), undefined, [f.createStringLiteral(spec)]);
  // var, not const: a later cell may import the same names again (an
  // agent's cells each begin with their imports), as the check allows.
  const decl = (name, init) => f.createVariableStatement(undefined, f.createVariableDeclarationList([f.createVariableDeclaration(name, undefined, undefined, init)], t.NodeFlags.None));
  return (sf) => t.visitEachChild(sf, (n) => {
    if (!t.isImportDeclaration(n) || !t.isStringLiteral(n.moduleSpecifier)) return n;
    const spec = n.moduleSpecifier.text;
    const c = n.importClause;
    if (!c) return f.createExpressionStatement(req(spec));
    if (c.isTypeOnly) return undefined;
    const out = [];
    // Unique in the session: every cell's declarations share one scope.
    const mod = f.createIdentifier('__runbox_import_' + (++imports));
    out.push(decl(mod, req(spec)));
    if (c.name) {
      // The default import: module.exports itself unless it is an ES
      // module's (esModuleInterop).
      out.push(decl(f.createIdentifier(c.name.text), f.createConditionalExpression(
        f.createLogicalAnd(mod, f.createPropertyAccessExpression(mod, '__esModule')), undefined,
        f.createPropertyAccessExpression(mod, 'default'), undefined, mod)));
    }
    const b = c.namedBindings;
    if (b && t.isNamespaceImport(b)) out.push(decl(f.createIdentifier(b.name.text), mod));
    if (b && t.isNamedImports(b)) {
      const els = b.elements.filter((e) => !e.isTypeOnly).map((e) => f.createBindingElement(undefined, e.propertyName ? e.propertyName.text : undefined, f.createIdentifier(e.name.text)));
      if (els.length) out.push(decl(f.createObjectBindingPattern(els), mod));
    }
    return out;
  }, context);
}

// Session checks a session's cells in the context of the earlier cells
// that type-checked: their source is the checked text's head, and only
// the new cell's errors are reported, at its own lines.
class Session {
  constructor() {
    this.checker = new Checker();
    this.head = '';
    this.headLines = 0;
    // importsInHead are the earlier cells' imports: { start, end, names }
    // in head. A cell that imports a name again supersedes the earlier
    // import, which is blanked out of head (the lines stay).
    this.importsInHead = [];
    // tools is the declarations of runbox_tools (typings), once asked.
    this.tools = null;
  }

  // cell returns { error } (the report of the cell's type errors) or
  // { js } (the script that runs it), for file (the cell's path).
  cell(file, text, check) {
    if (check) {
      const again = new Set();
      const imports = cellImports(text);
      for (const im of imports) for (const n of im.names) again.add(n);
      const superseded = this.importsInHead.filter((im) => im.names.some((n) => again.has(n)));
      let head = this.head;
      for (const im of superseded) head = head.slice(0, im.start) + head.slice(im.start, im.end).replace(/[^\n]/g, ' ') + head.slice(im.end);
      const whole = head + text;
      const extra = this.tools !== null ? [[TOOLS_TYPINGS, this.tools]] : (/runbox_tools/.test(whole) ? [[TOOLS_TYPINGS, TOOLS_FALLBACK]] : []);
      const diags = this.checker.check(file, whole, extra).filter((d) => !d.file || d.file.fileName !== file || d.start === undefined || d.start >= this.head.length);
      if (diags.length > 0) return { error: report(diags, this.headLines, file) };
      this.importsInHead = this.importsInHead.filter((im) => !superseded.includes(im))
        .concat(imports.map((im) => ({ start: im.start + head.length, end: im.end + head.length, names: im.names })));
      this.head = whole + '\n';
      this.headLines += text.split('\n').length;
    }
    const t = compiler();
    const out = t.transpileModule(text, {
      fileName: file, reportDiagnostics: false, transformers: { before: [requireImports] },
      compilerOptions: { target: t.ScriptTarget.ES2022, module: t.ModuleKind.ESNext, moduleDetection: t.ModuleDetectionKind.Legacy, sourceMap: true },
    });
    const map = JSON.parse(out.sourceMapText);
    map.sources = [file];
    // The compiler keeps a file that imported a module one (`export {};`,
    // a line of its own, emptied here): a cell is a script.
    const js = out.outputText.replace(/\n\/\/# sourceMappingURL=.*\s*$/, '\n').replace(/^export \{\};$/m, '');
    return { js, map };
  }
}

// cellImports lists a cell's import declarations: their range in text
// and the names each binds.
function cellImports(text) {
  const t = compiler();
  const sf = t.createSourceFile('cell.ts', text, t.ScriptTarget.ES2022, false);
  const out = [];
  for (const st of sf.statements) {
    const names = [];
    if (t.isImportDeclaration(st) && st.importClause) {
      const c = st.importClause;
      if (c.name) names.push(c.name.text);
      const b = c.namedBindings;
      if (b && t.isNamespaceImport(b)) names.push(b.name.text);
      if (b && t.isNamedImports(b)) for (const e of b.elements) names.push(e.name.text);
    } else if (t.isImportEqualsDeclaration(st)) {
      names.push(st.name.text);
    }
    if (names.length) out.push({ start: st.getStart(sf), end: st.end, names });
  }
  return out;
}

// mapStack rewrites the positions in file of a stack's text through map
// (a cell's source map): the cell's own lines and columns.
function mapStack(stack, file, map) {
  let sm;
  try { sm = new Module.SourceMap(map); } catch (e) { return stack; }
  const esc = file.replace(/[.*+?^${}()|[\]\\]/g, '\\$&');
  return stack.replace(new RegExp(esc + ':(\\d+):(\\d+)', 'g'), (all, l, c) => {
    const e = sm.findEntry(Number(l) - 1, Number(c) - 1);
    if (!e || e.originalLine === undefined) return all;
    return file + ':' + (e.originalLine + 1) + ':' + (e.originalColumn + 1);
  });
}

module.exports = { Session, mapStack, Checker, transpile, runnable, report, typings, typeCheck, registerTs, warm, hasTopLevelAwait, compiler, TOOLS_TYPINGS };

if (require.main === module) {
  const args = process.argv.slice(2);
  const checker = new Checker();
  let file = args[0];
  if (file === '--prestart') {
    try { warm(checker); } catch (e) { /* the real check reports it */ }
    file = '';
    try { file = fs.readFileSync(4, 'utf8').trim(); } catch (e) { /* below */ }
    if (!file) {
      // Never a silent success: no path means runbox-init could not hand
      // over the job.
      process.stderr.write('runbox: the prestarted interpreter got no code to run\n');
      process.exit(70);
    }
    process.argv.splice(2, 1);
  } else {
    process.argv.splice(2, 1);
  }
  if (!file) {
    process.stderr.write('usage: node runbox_ts.js FILE | --prestart\n');
    process.exit(2);
  }
  process.argv[1] = file;
  runMain(path.resolve(file), checker);
}
