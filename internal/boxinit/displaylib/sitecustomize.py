# runbox: display() as a built-in, and matplotlib's figures shown as
# displays. Cheap at start-up: nothing is imported until it is used.
import builtins as _b
import os as _os


def display(*objs, **kw):
    import runbox_display
    return runbox_display.display(*objs, **kw)


if not hasattr(_b, "display"):
    _b.display = display
# Agg still draws and saves; its show() also displays the figures.
if _os.environ.get("MPLBACKEND", "Agg").lower() == "agg":
    _os.environ["MPLBACKEND"] = "module://runbox_mpl"


def _image_sitecustomize():
    # This file hides the image's own sitecustomize, if it has one: run
    # it as Python would have.
    import sys
    here = _os.path.dirname(_os.path.abspath(__file__))
    for p in sys.path:
        f = _os.path.join(p or ".", "sitecustomize.py")
        if _os.path.abspath(p or ".") == here or not _os.path.isfile(f):
            continue
        import importlib.util
        spec = importlib.util.spec_from_file_location("_runbox_image_sitecustomize", f)
        spec.loader.exec_module(importlib.util.module_from_spec(spec))
        return


try:
    _image_sitecustomize()
except Exception as e:
    import sys
    print("Error in sitecustomize; set PYTHONVERBOSE for traceback:\n%s: %s" % (type(e).__name__, e), file=sys.stderr)
del _b, _os, _image_sitecustomize
