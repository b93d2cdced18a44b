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

del _b, _os
