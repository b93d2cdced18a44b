"""Prints the installed packages that the sandbox does not need, one a line.

Run inside the freshly debootstrapped rootfs (by images/build.sh, in a chroot,
with the rootfs's own python3):

    python3 prune.py packages.txt cut.txt

The packages to keep are the closure, over Depends and Pre-Depends, of the
packages in packages.txt and every package of priority required. cut.txt names
dependency edges ("package dependency" a line) that are not followed: Debian's
python3-scipy, for one, depends on python3-pythran, which pulls a whole C++
compiler, Boost and the Python headers into the box, none of which scipy uses
at run time. Everything installed outside the closure is printed, for
`dpkg --purge --force-depends`.
"""

import re
import sys

STATUS = "/var/lib/dpkg/status"


def installed():
    pkgs = {}
    with open(STATUS, encoding="utf-8") as f:
        stanzas = f.read().split("\n\n")
    for stanza in stanzas:
        fields, key = {}, None
        for line in stanza.splitlines():
            if line[:1] in (" ", "\t"):
                if key:
                    fields[key] += "\n" + line
            elif ":" in line:
                key, _, value = line.partition(":")
                fields[key] = value.strip()
        if fields.get("Package") and fields.get("Status", "").endswith(" installed"):
            pkgs[fields["Package"]] = fields
    return pkgs


def words(path):
    out = []
    with open(path, encoding="utf-8") as f:
        for line in f:
            line = line.split("#", 1)[0].strip()
            if line:
                out.append(line)
    return out


def bare(relation):
    """'python3-numpy:any (>= 1:1.22)' -> 'python3-numpy'"""
    return re.sub(r"\(.*?\)|\[.*?\]|<.*?>|:\S+", "", relation).strip()


def main():
    roots_file, cut_file = sys.argv[1], sys.argv[2]
    pkgs = installed()

    # Which installed packages satisfy a name: the package itself first, then
    # whatever provides it (libblas.so.3 is provided by libopenblas0-pthread).
    providers = {}
    for name in sorted(pkgs):
        providers.setdefault(name, []).insert(0, name)
    for name in sorted(pkgs):
        for p in pkgs[name].get("Provides", "").split(","):
            p = bare(p)
            if p and p != name:
                providers.setdefault(p, []).append(name)

    cut = {}
    for line in words(cut_file):
        pkg, dep = line.split()
        cut.setdefault(pkg, set()).add(dep)

    roots = set(words(roots_file))
    roots |= {n for n, f in pkgs.items() if f.get("Priority") == "required" or f.get("Essential") == "yes"}

    keep, todo = set(), sorted(roots)
    while todo:
        name = todo.pop()
        if name in keep:
            continue
        if name not in pkgs:
            sys.exit(f"prune.py: {name} is wanted but not installed")
        keep.add(name)
        f = pkgs[name]
        relations = ",".join(x for x in (f.get("Pre-Depends"), f.get("Depends")) if x)
        for group in relations.split(","):
            # The first alternative that is installed and not cut satisfies it.
            for alt in group.split("|"):
                alt = bare(alt)
                if not alt or alt in cut.get(name, ()):
                    continue
                if alt in providers:
                    todo.append(providers[alt][0])
                    break

    print("\n".join(sorted(set(pkgs) - keep)))


if __name__ == "__main__":
    main()
