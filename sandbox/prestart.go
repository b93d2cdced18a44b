package sandbox

import (
	"encoding/json"
	"strings"

	"github.com/runbox-mcp/runbox/contract"

	"github.com/runbox-mcp/runbox/internal/initproto"
	"github.com/runbox-mcp/runbox/manifest"
)

// pythonLoader runs in a pooled box before its job: it imports what the
// manifest preloads in a thread of its own while the main thread waits on
// descriptor 4 for the code's path, then becomes `python3 PATH`: a fresh
// __main__, the same argv and sys.path, and errors printed by the
// interpreter's own hook without the loader's frame, so the result is a
// cold run's but for time.
//
// The job never waits for the preload: a box taken while it still imports
// (a call soon after a refill, a slow host) starts the code at once, and
// the modules not yet begun are skipped. Code that imports a module the
// thread is importing waits for that import (the interpreter's module
// lock), which never costs more than importing it cold.
const pythonLoader = `import sys, os, _thread, threading
_go = []
def _preload(mods):
    # A bare thread: threading never lists it, so the code sees the
    # threads a cold run has.
    for m in mods:
        if _go:
            return
        try:
            __import__(m)
        except BaseException:
            pass
_thread.start_new_thread(_preload, (%s,))
with os.fdopen(4, "r") as _ctl:
    _path = _ctl.readline().strip()
_go.append(True)
if not _path:
    # Never a silent success: no path means runbox-init could not hand
    # over the job.
    print("runbox: the prestarted interpreter got no code to run", file=sys.stderr)
    os._exit(70)
import builtins, types, importlib.machinery
_main = types.ModuleType("__main__")
_main.__loader__ = importlib.machinery.SourceFileLoader("__main__", _path)
_main.__annotations__ = {}
_main.__builtins__ = builtins
_main.__file__ = _path
_main.__cached__ = None
sys.modules["__main__"] = _main
sys.argv[:] = [_path]
sys.path[0] = os.path.dirname(_path)
del _ctl
def _status(e):
    # What the interpreter makes of an uncaught SystemExit.
    c = e.code
    if c is None:
        return 0
    if isinstance(c, int):
        return c & 0xFF
    try:
        print(c, file=sys.stderr)
    except Exception:
        pass
    return 1
def _run(path, main):
    with open(path, "rb") as f:
        source = f.read()
    try:
        code = compile(source, path, "exec")
    except SyntaxError as e:
        # The interpreter prints the exception's own traceback: drop ours.
        sys.excepthook(type(e), e.with_traceback(None), None)
        return 1
    try:
        exec(code, main.__dict__)
    except SystemExit as e:
        return _status(e)
    except BaseException as e:
        e = e.with_traceback(e.__traceback__.tb_next)
        sys.excepthook(type(e), e, e.__traceback__)
        return 1
    return 0
def _exit(status, main):
    # The interpreter's shutdown, minus tearing down every preloaded
    # module (~65 ms with pandas): threads are joined, atexit runs, the
    # program's own objects are finalized (open files flushed, __del__
    # run), the standard streams are flushed.
    import threading, atexit, gc
    try:
        threading._shutdown()
    except BaseException:
        pass
    try:
        atexit._run_exitfuncs()
    except BaseException:
        pass
    for k in reversed(list(main.__dict__)):
        if k != "__builtins__":
            main.__dict__[k] = None
    gc.collect()
    for s in (sys.stdout, sys.stderr):
        try:
            s.flush()
        except BaseException:
            pass
    os._exit(status)
_exit(_run(_path, _main), _main)
`

// prestartArgs returns runbox-init's arguments for a pooled box of lang:
// a prestarted interpreter when the language preloads modules and runbox
// knows how to start it early, none otherwise.
func prestartArgs(m *manifest.Manifest, lang manifest.Language, isolation string) []string {
	// Under gVisor it does not pay: runsc cannot raise a pooled box's CPU
	// weight, so the preload competes with running calls at full weight,
	// and a box taken mid-preload shares its CPU with it. Measured on a
	// loaded host: a warm gVisor print(1) took 522-584 ms prestarted
	// against 307 ms without (docs/performance.md).
	if len(lang.Preload) == 0 || lang.ErrorFormat != "python" || len(lang.Check) > 0 || isolation == manifest.IsolationGVisor {
		return nil
	}
	mods, _ := json.Marshal(lang.Preload)
	job := initJob(m, contract.Job{Language: lang}, isolation)
	loader := strings.Replace(pythonLoader, "%s", string(mods), 1)
	pre := initproto.Prestart{
		Argv: []string{job.Argv[0], "-c", loader},
		Env:  job.Env, Dir: job.Dir, CPUSeconds: job.CPUSeconds, NProc: job.NProc,
	}
	return []string{initproto.PrestartFlag, initproto.EncodePrestart(pre)}
}
