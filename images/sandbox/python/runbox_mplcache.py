"""Seeds matplotlib's font cache from the copy built into the runbox image.

Every box is a fresh container with a read-only root, so matplotlib would
rebuild its font list (~100 ms) on the first import of every run. It only
accepts a cache in a writable directory, so an image-wide read-only copy
cannot be pointed at directly. Instead, when a program first imports
matplotlib, this copies the prebuilt list (images/build.sh makes it) into the
cache directory matplotlib is about to use: $MPLCONFIGDIR, else
$XDG_CACHE_HOME/matplotlib, else ~/.cache/matplotlib. Programs that do not
import matplotlib are not touched. Any failure leaves matplotlib to do what it
always does.

Loaded from runbox-mplcache.pth at interpreter start-up (`python3 -S` skips it).
"""

import os
import sys

PREBUILT = "/usr/share/runbox/matplotlib"


def _cache_dir():
    # As matplotlib's _get_config_or_cache_dir(get_xdg_cache_dir) on Linux.
    configured = os.environ.get("MPLCONFIGDIR")
    if configured:
        return os.path.realpath(configured)
    base = os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache")
    return os.path.join(base, "matplotlib")


def _seed():
    try:
        names = [n for n in os.listdir(PREBUILT) if n.startswith("fontlist-") and n.endswith(".json")]
        if not names:
            return
        target = _cache_dir()
        os.makedirs(target, exist_ok=True)
        for name in names:
            dest = os.path.join(target, name)
            if os.path.exists(dest):
                continue
            with open(os.path.join(PREBUILT, name), "rb") as f:
                data = f.read()
            tmp = "%s.%d.tmp" % (dest, os.getpid())
            with open(tmp, "wb") as f:
                f.write(data)
            os.replace(tmp, dest)
    except Exception:
        pass


class _SeedOnImport:
    """A meta-path finder that finds nothing: it only notices `import matplotlib`."""

    @staticmethod
    def find_spec(name, path=None, target=None):
        if name == "matplotlib":
            try:
                sys.meta_path.remove(_SeedOnImport)
            except ValueError:
                pass
            _seed()
        return None


if _SeedOnImport not in sys.meta_path:
    sys.meta_path.insert(0, _SeedOnImport)
