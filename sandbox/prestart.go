package sandbox

import (
	"encoding/json"
	"strings"

	"github.com/runbox-mcp/runbox/contract"

	"github.com/runbox-mcp/runbox/internal/initproto"
	"github.com/runbox-mcp/runbox/internal/pymain"
	"github.com/runbox-mcp/runbox/manifest"
)

// pythonLoader runs in a pooled box before its job, after the runner of a
// file as __main__ (internal/pymain, which a session's driver uses too):
// it imports what the manifest preloads in a thread of its own while the
// main thread waits on descriptor 4 for the code's path, then becomes
// `python3 PATH`: a fresh __main__, the same argv and sys.path, and errors
// printed by the interpreter's own hook without the loader's frame, so the
// result is a cold run's but for time. preloadList stands for the modules.
//
// The job never waits for the preload: a box taken while it still imports
// (a call soon after a refill, a slow host) starts the code at once, and
// the modules not yet begun are skipped, and the thread yields the
// interpreter to the code between the modules of the one under way
// (_RbxYield). Code that imports a module the thread is importing waits for
// that import (the interpreter's module lock), which never costs more
// than importing it cold. A preload that ended before the job came is
// frozen out of the collector's way (gc.freeze): the code's collections
// walk its own objects only. What the code can see of this is time, a
// finder on sys.meta_path while a preload is under way, and
// gc.get_freeze_count().
const pythonLoader = `import _thread
# threading before the preload thread starts: imported first by that
# thread (pandas imports it), threading would take it for the main
# thread, and the shutdown in _exit would wait for its imports to end.
import threading
_go = []
_pre_id = []
class _RbxYield:
    # First on sys.meta_path while the preload runs. Once the code runs,
    # the preload thread sleeps a moment before each module it begins:
    # the two share one interpreter lock, which would otherwise go to
    # them in turns, and the code is what the caller waits for: up to
    # 100 ms a module, in steps of 5 ms. It goes on at once when another
    # thread is inside an import, which may be waiting for a module the
    # preload thread holds; and it sleeps without the import lock, which
    # the interpreter holds around this call.
    @staticmethod
    def find_spec(name, path=None, target=None):
        if not _go or _thread.get_ident() not in _pre_id:
            return None
        _imp.release_lock()
        try:
            for _ in range(20):
                for t, f in sys._current_frames().items():
                    if t not in _pre_id and f.f_code.co_filename.startswith("<frozen importlib"):
                        return None
                time.sleep(0.005)
        finally:
            _imp.acquire_lock()
        return None
def _preload(mods):
    # A bare thread: threading never lists it, so the code sees the
    # threads a cold run has.
    _pre_id.append(_thread.get_ident())
    try:
        for m in mods:
            if _go:
                return
            try:
                __import__(m)
            except BaseException:
                pass
        # All loaded before the code came: what the preload made is moved
        # out of the collector's way (the code's collections, and the one
        # in _exit, walk the code's own objects only). Never once the code
        # runs, whose objects must stay collectable.
        with _go_lock:
            if not _go:
                gc.freeze()
    finally:
        try:
            sys.meta_path.remove(_RbxYield)
        except BaseException:
            pass
import time, _imp, gc
_go_lock = _thread.allocate_lock()
sys.meta_path.insert(0, _RbxYield)
_thread.start_new_thread(_preload, (` + preloadList + `,))
with os.fdopen(4, "r") as _ctl:
    _path = _ctl.readline().strip()
with _go_lock:
    _go.append(True)
if not _path:
    # Never a silent success: no path means runbox-init could not hand
    # over the job.
    print("runbox: the prestarted interpreter got no code to run", file=sys.stderr)
    os._exit(70)
_main = _rbx_new_main()
_rbx_enter(_main, _path)
del _ctl
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
_exit(_rbx_run(_path, _main.__dict__, False), _main)
`

// preloadList is where pythonLoader takes the modules to preload.
const preloadList = "_RBX_PRELOAD_"

// prestartArgs returns runbox-init's arguments for a pooled box of lang:
// a prestarted interpreter when the language preloads modules and runbox
// knows how to start it early, none otherwise.
func prestartArgs(m *manifest.Manifest, lang manifest.Language, isolation string) []string {
	if args := typeScriptPrestart(m, lang, isolation); args != nil {
		return args
	}
	if len(lang.Preload) == 0 || lang.ErrorFormat != "python" || len(lang.Check) > 0 {
		return nil
	}
	preload := lang.Preload
	if isolation == manifest.IsolationGVisor {
		// Under gVisor the interpreter is started but preloads nothing:
		// runsc cannot raise a pooled box's CPU weight, so a preload
		// competes with running calls at full weight, and a box taken
		// mid-preload shares its CPU with it (a warm print(1) took
		// 522-584 ms preloading against 307 ms without, on a loaded
		// host). The interpreter's own start (~55 ms under runsc) is
		// what pays there (docs/performance.md).
		preload = []string{}
	}
	mods, _ := json.Marshal(preload)
	job := initJob(m, contract.Job{Language: lang}, isolation)
	loader := pymain.Source + strings.Replace(pythonLoader, preloadList, string(mods), 1)
	pre := initproto.Prestart{
		Argv: []string{job.Argv[0], "-c", loader},
		Env:  job.Env, Dir: job.Dir, CPUSeconds: job.CPUSeconds, NProc: job.NProc,
	}
	return []string{initproto.PrestartFlag, initproto.EncodePrestart(pre)}
}

// typeScriptPrestart starts a pooled TypeScript box's runner ahead of its
// job: it loads the compiler and parses the libraries it checks against
// (most of a check's cost), then waits on descriptor 4 for the code's
// path. Only for the runner's own command (node RUNNER {file}).
func typeScriptPrestart(m *manifest.Manifest, lang manifest.Language, isolation string) []string {
	if lang.ErrorFormat != "typescript" || len(lang.Check) > 0 || len(lang.Command) != 3 ||
		lang.Command[1] != manifest.TypeScriptRunner || lang.Command[2] != "{file}" {
		return nil
	}
	job := initJob(m, contract.Job{Language: lang}, isolation)
	pre := initproto.Prestart{
		Argv: []string{job.Argv[0], manifest.TypeScriptRunner, "--prestart"},
		Env:  job.Env, Dir: job.Dir, CPUSeconds: job.CPUSeconds, NProc: job.NProc,
	}
	return []string{initproto.PrestartFlag, initproto.EncodePrestart(pre)}
}
