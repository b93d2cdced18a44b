"""runbox's matplotlib backend (MPLBACKEND=module://runbox_mpl): Agg's
canvas, so drawing and savefig are Agg's, whose show() displays the open
figures as PNGs; figures still open when the program or cell ends are
shown then."""
import atexit

from matplotlib.backend_bases import _Backend
from matplotlib.backends.backend_agg import FigureCanvasAgg, FigureManagerBase

import runbox_display


class FigureCanvas(FigureCanvasAgg):
    def print_figure(self, *args, **kwargs):
        r = super().print_figure(*args, **kwargs)
        # Saved as it is now: left open, it is a file already, not shown
        # again (unless it changes, which makes it stale).
        self.figure._runbox_saved = True
        return r


class FigureManager(FigureManagerBase):
    def show(self):
        runbox_display.show_figure(self.canvas.figure)


@_Backend.export
class _BackendRunbox(_Backend):
    FigureCanvas = FigureCanvas
    FigureManager = FigureManager

    @staticmethod
    def show(*args, **kwargs):
        runbox_display.show_open()


# Registered after pyplot's own exit handlers, so it runs before them.
atexit.register(runbox_display.show_open, unsaved=True)
