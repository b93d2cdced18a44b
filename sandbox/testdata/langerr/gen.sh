#!/bin/bash
# gen.sh captures, for real, the stderr of every case under this folder, the
# way the box runs the code:
#   python3 /workspace/main.py, node /workspace/main.js,
#   bash -n /workspace/main.sh and, when that passes, bash /workspace/main.sh.
# Each case runs from a fresh copy of its folder; the copy's path is then
# written back as /workspace, and the interpreter's library folder as
# Debian's, so that the samples read as the box prints them.
#
#   PYTHON=python3 NODE=node BASH_BIN=bash ./gen.sh [case folder...]
#
# The samples were made with the box's own interpreters, unpacked from
# Debian bookworm's packages (apt-get download python3.11-minimal
# libpython3.11-minimal libpython3.11-stdlib; nodejs libnode108 libuv1
# libc-ares2 node-acorn node-cjs-module-lexer node-undici, then dpkg -x),
# and with Node 20 for stderr.node20.txt. ROOT_PREFIX names the folder they
# were unpacked into: its .../usr/ paths are written back as /usr/.
#
# An optional file "pre" in a case holds a command prefix (prlimit, setpriv)
# put right before the interpreter through $PRE: interpreters given as
# wrapper scripts must honour $PRE. The output is stderr.txt for python and
# bash, stderr.nodeNN.txt for node.
set -u
here=$(cd "$(dirname "$0")" && pwd)
PYTHON=${PYTHON:-python3}
NODE=${NODE:-node}
BASH_BIN=${BASH_BIN:-bash}
pylib=$($PYTHON -c 'import sysconfig; print(sysconfig.get_paths()["stdlib"])')
nodemajor=$($NODE -p 'process.versions.node.split(".")[0]')

cases=("$@")
[ ${#cases[@]} -eq 0 ] && cases=("$here"/python/*/ "$here"/node/*/ "$here"/bash/*/ "$here"/resource/*/)

for c in "${cases[@]}"; do
	c=$(cd "$c" && pwd)
	tmp=$(mktemp -d /tmp/rbgen.XXXXXX)
	ws=$tmp/workspace
	cp -r "$c" "$ws"
	rm -f "$ws"/stderr*.txt "$ws"/pre
	chmod -R a+rwX "$tmp" # for cases run as another user
	pre=""
	[ -f "$c/pre" ] && pre=$(cat "$c/pre")
	main=$(cd "$ws" && ls main.* | head -1)
	rc=0
	case $main in
	main.py)
		out=stderr.txt
		(cd "$ws" && PRE=$pre timeout 120 $PYTHON "$ws/main.py" >/dev/null 2>"$tmp/err" </dev/null) || rc=$?
		;;
	main.js)
		out=stderr.node$nodemajor.txt
		(cd "$ws" && PRE=$pre timeout 120 $NODE "$ws/main.js" >/dev/null 2>"$tmp/err" </dev/null) || rc=$?
		;;
	main.sh)
		out=stderr.txt
		if (cd "$ws" && $BASH_BIN -n "$ws/main.sh" 2>"$tmp/err"); then
			(cd "$ws" && timeout 120 $pre $BASH_BIN "$ws/main.sh" >/dev/null 2>"$tmp/err" </dev/null) || rc=$?
		else
			rc="bash -n failed"
		fi
		;;
	esac
	echo "${c#"$here"/} $out: exit $rc"
	sed -e "s#$ws#/workspace#g" -e "s#$pylib#/usr/lib/python3.11#g" ${ROOT_PREFIX:+-e "s#$ROOT_PREFIX/usr/#/usr/#g"} "$tmp/err" >"$c/$out"
	rm -rf "$tmp"
done
