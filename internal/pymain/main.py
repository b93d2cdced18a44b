# runbox's runner of a file as __main__ (package pymain): definitions only.
import sys, os, ast, types, builtins, importlib.machinery


class _rbx:
    # The runner's own references: the code may replace what it can reach
    # (builtins.open = None, os.path.dirname = None), and the runner must
    # still report it, and a session take the next cell.
    sys, open, compile, exec, eval, print, repr, isinstance = sys, open, compile, exec, eval, print, repr, isinstance
    module, loader, dirname = types.ModuleType, importlib.machinery.SourceFileLoader, os.path.dirname
    parse_only, Expr, Expression = ast.PyCF_ONLY_AST, ast.Expr, ast.Expression
    fopen, fread, fclose, source_flags = os.open, os.read, os.close, os.O_RDONLY | os.O_CLOEXEC


def _rbx_new_main():
    # A fresh __main__, in place of the one running the runner.
    main = _rbx.module("__main__")
    main.__annotations__ = {}
    main.__builtins__ = builtins
    sys.modules["__main__"] = main
    return main


def _rbx_enter(main, path):
    # __main__, argv and sys.path name path, as `python3 path` does: its
    # directory first on the path, where -c put "" (the first file), or
    # before what the last one left.
    main.__loader__ = _rbx.loader("__main__", path)
    main.__file__ = path
    main.__cached__ = None
    try:
        _rbx.sys.argv[:] = [path]
        d = _rbx.dirname(path)
        if _rbx.sys.path and _rbx.sys.path[0] == "":
            _rbx.sys.path[0] = d
        elif not _rbx.sys.path or _rbx.sys.path[0] != d:
            _rbx.sys.path.insert(0, d)
    except BaseException:
        pass  # an earlier cell replaced sys.argv or sys.path


def _rbx_status(e):
    # What the interpreter makes of an uncaught SystemExit.
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
    # The interpreter's own report, without the runner's frame.
    tb = e.__traceback__
    if tb is not None:
        tb = tb.tb_next
    _rbx.sys.excepthook(type(e), e.with_traceback(tb), tb)


def _rbx_display_result(value):
    # A cell's last value with a rich representation (a frame, a figure,
    # _repr_png_...) is displayed (runbox-init's display library); True
    # when it was, and is then not printed.
    try:
        import runbox_display
        return runbox_display.result(value)
    except Exception:
        return False


def _rbx_source(path):
    # The file's bytes, as open(path, "rb").read() gives them, in four
    # system calls where a buffered file makes nine (its fstat, isatty
    # and tell calls): a session's cell reads its file every time.
    fd = _rbx.fopen(path, _rbx.source_flags)
    try:
        chunks = []
        while True:
            b = _rbx.fread(fd, 1 << 16)
            if not b:
                return b"".join(chunks)
            chunks.append(b)
    finally:
        _rbx.fclose(fd)


def _rbx_run(path, g, show_last):
    # Runs the file at path in the namespace g and returns the exit status
    # `python3 path` would have; show_last (a session's cell) shows the
    # value of a last expression as a notebook does: displayed, or by its
    # repr.
    source = _rbx_source(path)
    try:
        tree = _rbx.compile(source, path, "exec", _rbx.parse_only)
    except (SyntaxError, ValueError) as e:
        # The interpreter prints the exception's own traceback: drop ours.
        # (A NUL byte in the source is a ValueError before Python 3.12.)
        _rbx.sys.excepthook(type(e), e.with_traceback(None), None)
        return 1
    last = None
    if show_last and tree.body and _rbx.isinstance(tree.body[-1], _rbx.Expr):
        last = _rbx.Expression(tree.body.pop().value)
    try:
        _rbx.exec(_rbx.compile(tree, path, "exec"), g)
        if last is not None:
            value = _rbx.eval(_rbx.compile(last, path, "eval"), g)
            if value is not None:
                g["_"] = value
                if not _rbx_display_result(value):
                    _rbx.print(_rbx.repr(value))
    except SystemExit as e:
        return _rbx_status(e)
    except BaseException as e:
        _rbx_report(e)
        return 130 if _rbx.isinstance(e, KeyboardInterrupt) else 1
    return 0
