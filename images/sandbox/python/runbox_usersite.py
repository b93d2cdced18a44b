"""Puts the user's site-packages on sys.path even before it exists.

pip installs into the user's site ($HOME/.local/lib/python3.X/site-packages,
HOME being the box's /tmp), but site.py adds that directory to sys.path only
if it exists when the interpreter starts, and in a fresh box it never does:
`pip install x` followed by `import x` in the same program, or in the next
cell of a session, would not find x. So this creates the directory and puts
it where site.py would have: before the system's site-packages, so that a
package the program installed wins over the image's copy. Nothing is done
when user sites are off (python3 -s, -I, or a setuid interpreter) or the
directory cannot be made.

Loaded from runbox-usersite.pth at interpreter start-up (`python3 -S` skips it).
"""

import os
import site
import sys


def _activate():
    if not site.ENABLE_USER_SITE:
        return
    path = site.getusersitepackages()
    if path in sys.path:
        return
    try:
        os.makedirs(path, exist_ok=True)
    except OSError:
        return
    at = len(sys.path)
    for i, p in enumerate(sys.path):
        if p.endswith(("site-packages", "dist-packages")):
            at = i
            break
    sys.path.insert(at, path)


_activate()
