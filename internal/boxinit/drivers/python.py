# runbox session driver for Python: one interpreter, one __main__, many
# cells. runbox-init writes a JSON line per cell on descriptor 4
# ({"path", "stdin", "marker"}) and then the cell's stdin, "stdin" bytes of
# it; the cell ends with the marker on stdout, and on stderr the marker,
# the status and "\x1e".
import sys, os, json, ast, signal, builtins, types, threading, importlib.machinery
_rbx_in_cell = False


def _rbx_sigint(signum, frame):
    # A running cell is interrupted as a terminal would; an interrupt that
    # raced the cell's end is dropped, never raised in the driver's loop.
    if _rbx_in_cell:
        raise KeyboardInterrupt


signal.signal(signal.SIGINT, _rbx_sigint)
_rbx_ctl = os.fdopen(4, "rb")
_rbx_main = types.ModuleType("__main__")
_rbx_main.__builtins__ = builtins
_rbx_main.__annotations__ = {}
sys.modules["__main__"] = _rbx_main


def _rbx_status(e):
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


def _rbx_report(e):
    # The interpreter's own report, without the driver's frame.
    tb = e.__traceback__
    if tb is not None:
        tb = tb.tb_next
    sys.excepthook(type(e), e.with_traceback(tb), tb)


def _rbx_feed(w, data):
    try:
        while data:
            data = data[os.write(w, data):]
    except OSError:
        pass  # the cell closed its stdin, or ended without reading it all
    finally:
        os.close(w)


def _rbx_stdin(data):
    # The cell's stdin is a pipe of its own: nothing is written to the
    # box's writable space, which an earlier cell may have filled.
    if data:
        r, w = os.pipe()
        os.set_blocking(w, False)
        try:
            data = data[os.write(w, data):]
        except BlockingIOError:
            pass
        if data:
            os.set_blocking(w, True)
            threading.Thread(target=_rbx_feed, args=(w, memoryview(data)), daemon=True).start()
        else:
            os.close(w)
    else:
        r = os.open(os.devnull, os.O_RDONLY)
    os.dup2(r, 0)
    os.close(r)
    sys.stdin = open(0, "r", closefd=False)


def _rbx_cell(path, g):
    with open(path, "rb") as f:
        source = f.read()
    try:
        tree = compile(source, path, "exec", ast.PyCF_ONLY_AST)
    except SyntaxError as e:
        sys.excepthook(type(e), e.with_traceback(None), None)
        return 1
    last = None
    if tree.body and isinstance(tree.body[-1], ast.Expr):
        last = ast.Expression(tree.body.pop().value)
    try:
        exec(compile(tree, path, "exec"), g)
        if last is not None:
            value = eval(compile(last, path, "eval"), g)
            if value is not None:
                # As a notebook shows a cell's value: its repr.
                g["_"] = value
                print(repr(value))
    except SystemExit as e:
        return _rbx_status(e)
    except BaseException as e:
        _rbx_report(e)
        return 130 if isinstance(e, KeyboardInterrupt) else 1
    return 0


_rbx_g = _rbx_main.__dict__
for _rbx_line in _rbx_ctl:
    _rbx_req = json.loads(_rbx_line)
    _rbx_data = _rbx_ctl.read(_rbx_req["stdin"]) if _rbx_req["stdin"] else b""
    _rbx_path = _rbx_req["path"]
    _rbx_g["__file__"] = _rbx_path
    _rbx_main.__loader__ = importlib.machinery.SourceFileLoader("__main__", _rbx_path)
    sys.argv[:] = [_rbx_path]
    if sys.path and sys.path[0] != os.path.dirname(_rbx_path):
        sys.path.insert(0, os.path.dirname(_rbx_path))
    try:
        _rbx_stdin(_rbx_data)
    except OSError:
        pass
    try:
        _rbx_in_cell = True
        _rbx_exit = _rbx_cell(_rbx_path, _rbx_g)
    except KeyboardInterrupt:
        _rbx_exit = 130
    finally:
        _rbx_in_cell = False
    for _rbx_s in (sys.stdout, sys.stderr):
        try:
            _rbx_s.flush()
        except BaseException:
            pass
    _rbx_m = _rbx_req["marker"].encode()
    for _rbx_fd, _rbx_b in ((1, _rbx_m), (2, _rbx_m + b"%d\x1e" % _rbx_exit)):
        try:
            os.write(_rbx_fd, _rbx_b)
        except OSError:
            pass
