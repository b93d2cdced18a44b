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
#   BOX=runbox/sandbox:bookworm ./gen.sh heap/*/
#
# The samples under python/, node/, bash/ and resource/ were made with the
# box's own interpreters, unpacked from Debian bookworm's packages (apt-get
# download python3.11-minimal libpython3.11-minimal libpython3.11-stdlib;
# nodejs libnode108 libuv1 libc-ares2 node-acorn node-cjs-module-lexer
# node-undici, then dpkg -x), and with Node 20 for stderr.node20.txt.
# ROOT_PREFIX names the folder they were unpacked into: its .../usr/ paths
# are written back as /usr/.
#
# With BOX set to an image, each case runs in a container of that image
# instead (docker run --network none -m $BOX_MEMORY, default 256m), its copy
# mounted at /workspace; PYTHON, NODE and BASH_BIN then name the
# interpreters inside the image. The heap/ samples' stderr.node18.txt were
# made so, from runbox/sandbox:bookworm; their stderr.node20.txt with the
# host's Node 20.
#
# An optional file "pre" in a case holds a command prefix (prlimit, setpriv)
# put right before the interpreter through $PRE: interpreters given as
# wrapper scripts must honour $PRE (with BOX, the prefix runs in the box). An
# optional file "env" holds VAR=value lines added to the interpreter's
# environment, as the box adds NODE_OPTIONS=--max-old-space-size=N. The
# output is stderr.txt for python and bash, stderr.nodeNN.txt for node.
set -u
here=$(cd "$(dirname "$0")" && pwd)
PYTHON=${PYTHON:-python3}
NODE=${NODE:-node}
BASH_BIN=${BASH_BIN:-bash}
BOX=${BOX:-}
BOX_MEMORY=${BOX_MEMORY:-256m}

# probe runs a command where the cases run: in a fresh box of $BOX, or here.
probe() {
	if [ -n "$BOX" ]; then
		docker run --rm -i --network none "$BOX" "$@"
	else
		"$@"
	fi
}

pylib=$(probe $PYTHON -c 'import sysconfig; print(sysconfig.get_paths()["stdlib"])' </dev/null)
nodemajor=$(probe $NODE -p 'process.versions.node.split(".")[0]' </dev/null)

cases=("$@")
[ ${#cases[@]} -eq 0 ] && cases=("$here"/python/*/ "$here"/node/*/ "$here"/bash/*/ "$here"/resource/*/ "$here"/heap/*/)

for c in "${cases[@]}"; do
	c=$(cd "$c" && pwd)
	tmp=$(mktemp -d /tmp/rbgen.XXXXXX)
	ws=$tmp/workspace
	cp -r "$c" "$ws"
	rm -f "$ws"/stderr*.txt "$ws"/pre "$ws"/env
	chmod -R a+rwX "$tmp" # for cases run as another user
	pre=""
	[ -f "$c/pre" ] && pre=$(cat "$c/pre")
	envs=()
	[ -f "$c/env" ] && mapfile -t envs < <(grep -v -e '^#' -e '^$' "$c/env")
	# run ERR CMD... runs an interpreter on the case, its stderr to ERR: in
	# a box, where the copy is /workspace, or here, in the copy. Here, the
	# redirections are the subshell's own, so that the shell's report of a
	# killed interpreter ("line 9: 123 Aborted ...") stays out of ERR.
	if [ -n "$BOX" ]; then
		wsrun=/workspace
		run() {
			local err=$1 args=(-v "$ws:/workspace" -w /workspace)
			shift
			for e in ${envs[@]+"${envs[@]}"}; do args+=(-e "$e"); done
			timeout 120 docker run --rm -i --network none -m "$BOX_MEMORY" "${args[@]}" "$BOX" $pre "$@" >/dev/null 2>"$err" </dev/null
		}
	else
		wsrun=$ws
		run() {
			local err=$1
			shift
			(cd "$ws" && PRE=$pre exec timeout 120 env ${envs[@]+"${envs[@]}"} "$@" >/dev/null 2>"$err" </dev/null)
		}
	fi
	main=$(cd "$ws" && ls main.* | head -1)
	rc=0
	case $main in
	main.py)
		out=stderr.txt
		run "$tmp/err" $PYTHON "$wsrun/main.py" || rc=$?
		;;
	main.js)
		out=stderr.node$nodemajor.txt
		run "$tmp/err" $NODE "$wsrun/main.js" || rc=$?
		;;
	main.sh)
		out=stderr.txt
		if (pre="" && run "$tmp/err" $BASH_BIN -n "$wsrun/main.sh"); then
			if [ -n "$BOX" ]; then
				run "$tmp/err" $BASH_BIN "$wsrun/main.sh" || rc=$?
			else
				# Here, the prefix goes before bash itself.
				(cd "$ws" && exec timeout 120 env ${envs[@]+"${envs[@]}"} $pre $BASH_BIN "$ws/main.sh" >/dev/null 2>"$tmp/err" </dev/null) || rc=$?
			fi
		else
			rc="bash -n failed"
		fi
		;;
	esac
	echo "${c#"$here"/} $out: exit $rc"
	sed -e "s#$ws#/workspace#g" -e "s#$pylib#/usr/lib/python3.11#g" ${ROOT_PREFIX:+-e "s#$ROOT_PREFIX/usr/#/usr/#g"} "$tmp/err" >"$c/$out"
	rm -rf "$tmp"
done
