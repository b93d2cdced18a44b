# runbox session driver for Python: one interpreter, one __main__, many
# cells. runbox-init writes a line per cell on descriptor 4 ("length marker
# path") and then the cell's stdin, length bytes of it; the cell ends with
# the marker on stdout, and on stderr the marker, the status and "\x1e".
# The runner of a file as __main__ (internal/pymain) comes before this text.
# json is imported ahead for the cells: their first import of it costs
# nothing.
import json, signal, threading
_rbx_in_cell = False


def _rbx_sigint(signum, frame):
    # A running cell is interrupted as a terminal would; an interrupt that
    # raced the cell's end is dropped, never raised in the driver's loop.
    if _rbx_in_cell:
        raise KeyboardInterrupt


signal.signal(signal.SIGINT, _rbx_sigint)

# The driver's own references, beside the runner's: a cell may replace what
# it can reach (os.write = None, int = None), and the session must
# still take the next cell.
_rbx.write, _rbx.read, _rbx.dup, _rbx.dup2, _rbx.pipe, _rbx.close = os.write, os.read, os.dup, os.dup2, os.pipe, os.close
_rbx.set_blocking, _rbx.osopen, _rbx.devnull, _rbx.rdonly = os.set_blocking, os.open, os.devnull, os.O_RDONLY
_rbx.int, _rbx.thread, _rbx.memoryview, _rbx.vars = int, threading.Thread, memoryview, vars
# The last empty stdin's file, its encoding and errors (_rbx_stdin).
_rbx.null_stdin = None

# The cells' children never read the requests; the markers go on copies of
# stdout and stderr, so that a cell that closed them still ends.
os.set_inheritable(4, False)
_rbx_ctl = os.fdopen(4, "rb")
_rbx_out, _rbx_err = os.dup(1), os.dup(2)
_rbx_main = _rbx_new_main()


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
    if not data and _rbx_null_stdin_kept():
        return
    _rbx.sys.stdin = _rbx.open(0, "r", closefd=False)
    _rbx.null_stdin = None if data else (_rbx.sys.stdin, _rbx.sys.stdin.encoding, _rbx.sys.stdin.errors)


def _rbx_null_stdin_kept():
    # The last cell's stdin was empty too, and that file is still the
    # cell's, open, as it was made: it reads /dev/null again as a new one
    # would, without the three system calls of making one.
    try:
        f, encoding, errors = _rbx.null_stdin
        return (_rbx.sys.stdin is f and not f.closed and f.encoding == encoding and f.errors == errors
                and not f.line_buffering and _rbx.vars(f) == {"mode": "r"})
    except BaseException:
        return False


_rbx_g = _rbx_main.__dict__
for _rbx_line in _rbx_ctl:
    _rbx_n, _rbx_m, _rbx_path = _rbx_line[:-1].split(b" ", 2)
    _rbx_n = _rbx.int(_rbx_n)
    _rbx_data = _rbx_ctl.read(_rbx_n) if _rbx_n else b""
    _rbx_path = _rbx_path.decode()
    _rbx_enter(_rbx_main, _rbx_path)
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
        _rbx_exit = _rbx_run(_rbx_path, _rbx_g, True)
    except KeyboardInterrupt:
        _rbx_exit = 130
    finally:
        _rbx_in_cell = False
    # Figures still open when the cell ends are shown, as a notebook does.
    if "matplotlib.pyplot" in _rbx.sys.modules:
        try:
            import runbox_display
            runbox_display.show_open(unsaved=True)
        except BaseException:
            pass
    for _rbx_s in (_rbx.sys.stdout, _rbx.sys.stderr):
        try:
            _rbx_s.flush()
        except BaseException:
            pass
    for _rbx_fd, _rbx_b in ((_rbx_out, _rbx_m), (_rbx_err, _rbx_m + b"%d\x1e" % _rbx_exit)):
        try:
            _rbx.write(_rbx_fd, _rbx_b)
        except OSError:
            pass
