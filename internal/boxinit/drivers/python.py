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


class _rbx:
    # The driver's own references: a cell may replace what it can reach
    # (os.write = None, builtins.open = None, json.loads = None), and the
    # session must still take the next cell.
    write, read, dup, dup2, pipe, close, set_blocking = os.write, os.read, os.dup, os.dup2, os.pipe, os.close, os.set_blocking
    osopen, devnull, rdonly, dirname = os.open, os.devnull, os.O_RDONLY, os.path.dirname
    loads, thread, loader = json.loads, threading.Thread, importlib.machinery.SourceFileLoader
    open, compile, exec, eval, print, repr, isinstance, memoryview = open, compile, exec, eval, print, repr, isinstance, memoryview
    sys, parse_only, Expr, Expression = sys, ast.PyCF_ONLY_AST, ast.Expr, ast.Expression


# The cells' children never read the requests; the markers go on copies of
# stdout and stderr, so that a cell that closed them still ends.
os.set_inheritable(4, False)
_rbx_ctl = os.fdopen(4, "rb")
_rbx_out, _rbx_err = os.dup(1), os.dup(2)
_rbx_main = types.ModuleType("__main__")
_rbx_main.__builtins__ = builtins
_rbx_main.__annotations__ = {}
sys.modules["__main__"] = _rbx_main


def _rbx_status(e):
    c = e.code
    if c is None:
        return 0
    if _rbx.isinstance(c, int):
        return c & 0xFF
    try:
        _rbx.print(c, file=_rbx.sys.stderr)
    except Exception:
        pass
    return 1


def _rbx_report(e):
    # The interpreter's own report, without the driver's frame.
    tb = e.__traceback__
    if tb is not None:
        tb = tb.tb_next
    _rbx.sys.excepthook(type(e), e.with_traceback(tb), tb)


def _rbx_feed(w, data):
    try:
        while data:
            data = data[_rbx.write(w, data):]
    except OSError:
        pass  # the cell closed its stdin, or ended without reading it all
    finally:
        _rbx.close(w)


def _rbx_stdin(data):
    # The cell's stdin is a pipe of its own: nothing is written to the
    # box's writable space, which an earlier cell may have filled.
    if data:
        r, w = _rbx.pipe()
        _rbx.set_blocking(w, False)
        try:
            data = data[_rbx.write(w, data):]
        except BlockingIOError:
            pass
        if data:
            _rbx.set_blocking(w, True)
            _rbx.thread(target=_rbx_feed, args=(w, _rbx.memoryview(data)), daemon=True).start()
        else:
            _rbx.close(w)
    else:
        r = _rbx.osopen(_rbx.devnull, _rbx.rdonly)
    _rbx.dup2(r, 0)
    _rbx.close(r)
    _rbx.sys.stdin = _rbx.open(0, "r", closefd=False)


def _rbx_cell(path, g):
    with _rbx.open(path, "rb") as f:
        source = f.read()
    try:
        tree = _rbx.compile(source, path, "exec", _rbx.parse_only)
    except SyntaxError as e:
        _rbx.sys.excepthook(type(e), e.with_traceback(None), None)
        return 1
    last = None
    if tree.body and _rbx.isinstance(tree.body[-1], _rbx.Expr):
        last = _rbx.Expression(tree.body.pop().value)
    try:
        _rbx.exec(_rbx.compile(tree, path, "exec"), g)
        if last is not None:
            value = _rbx.eval(_rbx.compile(last, path, "eval"), g)
            if value is not None:
                # As a notebook shows a cell's value: its repr.
                g["_"] = value
                _rbx.print(_rbx.repr(value))
    except SystemExit as e:
        return _rbx_status(e)
    except BaseException as e:
        _rbx_report(e)
        return 130 if _rbx.isinstance(e, KeyboardInterrupt) else 1
    return 0


_rbx_g = _rbx_main.__dict__
for _rbx_line in _rbx_ctl:
    _rbx_req = _rbx.loads(_rbx_line)
    _rbx_data = _rbx_ctl.read(_rbx_req["stdin"]) if _rbx_req["stdin"] else b""
    _rbx_path = _rbx_req["path"]
    _rbx_g["__file__"] = _rbx_path
    _rbx_main.__loader__ = _rbx.loader("__main__", _rbx_path)
    try:
        _rbx.sys.argv[:] = [_rbx_path]
        if _rbx.sys.path and _rbx.sys.path[0] != _rbx.dirname(_rbx_path):
            _rbx.sys.path.insert(0, _rbx.dirname(_rbx_path))
    except BaseException:
        pass
    # Each cell starts with the session's stdout and stderr, whatever an
    # earlier one closed.
    for _rbx_fd, _rbx_saved in ((1, _rbx_out), (2, _rbx_err)):
        try:
            _rbx.dup2(_rbx_saved, _rbx_fd)
        except OSError:
            pass
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
    for _rbx_s in (_rbx.sys.stdout, _rbx.sys.stderr):
        try:
            _rbx_s.flush()
        except BaseException:
            pass
    _rbx_m = _rbx_req["marker"].encode()
    for _rbx_fd, _rbx_b in ((_rbx_out, _rbx_m), (_rbx_err, _rbx_m + b"%d\x1e" % _rbx_exit)):
        try:
            _rbx.write(_rbx_fd, _rbx_b)
        except OSError:
            pass
