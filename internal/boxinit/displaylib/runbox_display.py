"""runbox's displays in the box: display(), the _repr_*_ protocol,
matplotlib's show(), and pandas frames as tables.

Each display is a directory of the spool with its mimes' data and then
display.json; a mark on stdout says where it falls in the output.
runbox-init reads them when the call ends.
"""
import json
import math
import os
import sys

SPOOL = "/tmp/.runbox/displays"
MARK = "\x1b]5379;runbox-display;%s\x07"
NAMES = {
    "image/png": "image.png",
    "image/jpeg": "image.jpg",
    "image/svg+xml": "image.svg",
    "text/html": "index.html",
    "text/markdown": "text.md",
    "text/latex": "text.tex",
    "text/plain": "text.txt",
    "application/json": "data.json",
    "application/vnd.runbox.table+json": "table.json",
}
REPRS = [
    ("image/png", "_repr_png_"),
    ("image/jpeg", "_repr_jpeg_"),
    ("image/svg+xml", "_repr_svg_"),
    ("text/html", "_repr_html_"),
    ("text/markdown", "_repr_markdown_"),
    ("text/latex", "_repr_latex_"),
    ("application/json", "_repr_json_"),
]
# A table keeps this much of a frame; its shape says how much there is.
TABLE_ROWS, TABLE_COLUMNS, CELL_CHARS = 1000, 100, 1000
PLAIN_CHARS = 20000
_seq = [0]


def _write(path, data):
    with open(path, "wb") as f:
        f.write(data)


def _emit(bundle, source):
    # Writes one display; a display that cannot be written (the box's
    # space is full) is said on stderr and the program goes on.
    _seq[0] += 1
    name = "%d-%d" % (os.getpid(), _seq[0])
    d = os.path.join(SPOOL, name)
    mimes, refused = {}, {}
    try:
        os.makedirs(d)
        for mime, data in bundle.items():
            if mime not in NAMES or data is None:
                continue
            if isinstance(data, str):
                data = data.encode("utf-8", "replace")
            elif not isinstance(data, (bytes, bytearray)):
                data = json.dumps(data, default=str).encode()
            try:
                _write(os.path.join(d, NAMES[mime]), data)
                mimes[mime] = NAMES[mime]
            except OSError as e:
                # Past the box's file size limit or space: said, and its
                # size reported; the space is the program's again.
                try:
                    os.unlink(os.path.join(d, NAMES[mime]))
                except OSError:
                    pass
                refused[mime] = len(data)
                print("runbox: %s display not kept (%d bytes): %s" % (mime, len(data), e.strerror), file=sys.stderr)
        _write(os.path.join(d, "display.json"), json.dumps({"source": source, "mimes": mimes, "refused": refused}).encode())
    except OSError as e:
        import shutil
        shutil.rmtree(d, ignore_errors=True)
        print("runbox: display not kept: %s" % e, file=sys.stderr)
        return
    # The mark goes on descriptor 1 itself, after what Python holds for
    # it: a program that redirected sys.stdout (to a StringIO) never
    # finds it in its own data.
    for s in (sys.stdout, sys.stderr, sys.__stdout__):
        try:
            s.flush()
        except Exception:
            pass
    try:
        os.write(1, (MARK % name).encode())
    except OSError:
        pass


def _cell(v):
    if v is None or isinstance(v, bool):
        return v
    if isinstance(v, int):
        return v if abs(v) < 2**53 else str(v)
    if isinstance(v, float):
        return v if math.isfinite(v) else None
    try:
        import numpy as np
        if isinstance(v, np.generic):
            return _cell(v.item())
    except Exception:
        pass
    try:
        import pandas as pd
        if v is pd.NA or v is pd.NaT:
            return None
    except Exception:
        pass
    s = str(v)
    return s if len(s) <= CELL_CHARS else s[:CELL_CHARS] + "…"


def table(frame):
    """The table JSON of a pandas DataFrame (or Series): its first rows and
    columns, its whole shape."""
    import pandas as pd
    if isinstance(frame, pd.Series):
        frame = frame.to_frame()
    rows, cols = frame.shape
    part = frame.iloc[:TABLE_ROWS, :TABLE_COLUMNS]
    t = {
        "columns": [_cell(c) if not isinstance(c, tuple) else " / ".join(map(str, c)) for c in part.columns],
        "rows": [[_cell(v) for v in row] for row in part.itertuples(index=False, name=None)],
        "shape": [rows, cols],
    }
    if not isinstance(part.index, pd.RangeIndex) or part.index.start != 0 or part.index.step != 1:
        t["index"] = [_cell(i) if not isinstance(i, tuple) else " / ".join(map(str, i)) for i in part.index]
        if part.index.name is not None:
            t["index_name"] = _cell(part.index.name)
    if rows > TABLE_ROWS or cols > TABLE_COLUMNS:
        t["cut"] = "kept %d of %d rows and %d of %d columns" % (min(rows, TABLE_ROWS), rows, min(cols, TABLE_COLUMNS), cols)
    return t


def _plain(obj):
    try:
        s = repr(obj)
    except Exception as e:
        s = "<repr failed: %s>" % type(e).__name__
    return s if len(s) <= PLAIN_CHARS else s[:PLAIN_CHARS] + "…"


def bundle(obj, rich_only=False):
    """The mime bundle of obj, by the _repr_*_ protocol; None when rich_only
    and obj has nothing but its text."""
    b = {}
    mod = type(obj).__module__ or ""
    if mod.startswith("pandas"):
        try:
            import pandas as pd
            # A Styler (whose module needs jinja2, which may be missing)
            # is its frame.
            if type(obj).__name__ == "Styler" and isinstance(getattr(obj, "data", None), pd.DataFrame):
                obj = obj.data
            if isinstance(obj, (pd.DataFrame, pd.Series)):
                return {"application/vnd.runbox.table+json": table(obj), "text/plain": _plain(obj)}
        except Exception:
            pass
    if mod.startswith("matplotlib"):
        fig = getattr(obj, "figure", None) if not hasattr(obj, "savefig") else obj
        if fig is not None and hasattr(fig, "savefig"):
            return {"image/png": _png(fig)}
    f = getattr(obj, "_repr_mimebundle_", None)
    if callable(f):
        try:
            r = f()
            if isinstance(r, tuple):
                r = r[0]
            if isinstance(r, dict):
                b.update({k: v for k, v in r.items() if k in NAMES})
        except Exception:
            pass
    for mime, meth in REPRS:
        f = getattr(obj, meth, None)
        if mime in b or not callable(f):
            continue
        try:
            r = f()
        except Exception:
            continue
        if isinstance(r, tuple):
            r = r[0]
        if r is None:
            continue
        if mime in ("image/png", "image/jpeg") and isinstance(r, str):
            import base64
            try:
                r = base64.b64decode(r)
            except Exception:
                continue
        b[mime] = r
    if rich_only and not b:
        return None
    b.setdefault("text/plain", _plain(obj))
    return b


def display(*objs, raw=False, source="display", **_):
    """Displays each obj as a notebook does: its richest representations
    (_repr_png_, _repr_html_, ...; a pandas frame as a table; a matplotlib
    figure as a PNG). raw=True takes obj as a mime bundle already."""
    for obj in objs:
        if raw and isinstance(obj, dict):
            _emit(obj, source)
        else:
            _emit(bundle(obj), source)


def result(value):
    """A session cell's last value: displayed when it has a rich
    representation (True), else left to be printed (False)."""
    b = bundle(value, rich_only=True)
    if b is None:
        return False
    _emit(b, "result")
    return True


def _png(fig):
    import io
    buf = io.BytesIO()
    fig.savefig(buf, format="png")
    return buf.getvalue()


def show_figure(fig):
    """Shows one matplotlib figure and closes it."""
    try:
        _emit({"image/png": _png(fig)}, "show")
    finally:
        plt = sys.modules.get("matplotlib.pyplot")
        if plt is not None:
            plt.close(fig)


def show_open(unsaved=False):
    """Shows every open matplotlib figure, and closes it; unsaved (figures
    left open at the end) skips those saved with savefig since they last
    changed, which came back as files."""
    plt = sys.modules.get("matplotlib.pyplot")
    if plt is None:
        return
    for num in plt.get_fignums():
        fig = plt.figure(num)
        if unsaved and getattr(fig, "_runbox_saved", False) and not fig.stale:
            plt.close(fig)
            continue
        show_figure(fig)
