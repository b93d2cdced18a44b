# runbox session driver for bash: one shell; each cell is sourced, so
# variables, functions and the working directory persist. runbox-init
# writes "length marker code-path" per cell on descriptor 4, and then the
# cell's stdin as that many characters of printf %b text (a pipe: nothing
# is written to the box's writable space, which a cell may fill); the cell
# ends with the marker on stdout, and on stderr the marker, the status
# ("c" after it when the syntax check refused the cell) and "\x1e". An
# interrupt returns from the cell. The driver calls builtins as builtins:
# a cell may define functions named printf, read or source.
trap 'return 130 2>/dev/null' INT
readonly __rbx_bash="$BASH"
# Each cell starts with the session's stdout and stderr, whatever an
# earlier one closed or redirected.
builtin exec {__rbx_out}>&1 {__rbx_err}>&2
while IFS=' ' builtin read -r __rbx_n __rbx_marker __rbx_path <&4; do
	builtin exec 1>&"$__rbx_out" 2>&"$__rbx_err"
	__rbx_in=
	if builtin [ "$__rbx_n" != 0 ]; then
		builtin read -r -N "$__rbx_n" __rbx_in <&4
	fi
	# The syntax check reads the cell as `bash -n` does (set -n: read,
	# not run), with the parser's options of a new bash (an earlier cell
	# may have set them), in a subshell of this shell: a fork, where a new
	# bash is a fork and an exec, and most of a cell's time. A cell that
	# does not parse there, holds a NUL byte (no variable can) or was read
	# as nothing is checked by `bash -n` itself, whose message and status
	# the cell gets.
	if ( builtin shopt -u extglob expand_aliases
		__rbx_src= && { IFS= builtin read -r -d '' __rbx_src; builtin [ "$?" = 1 ]; } &&
			builtin [ -n "$__rbx_src" ] && builtin eval "builtin set -n
$__rbx_src" ) <"$__rbx_path" 2>/dev/null || "$__rbx_bash" -n "$__rbx_path"; then
		if builtin [ -n "$__rbx_in" ]; then
			builtin source "$__rbx_path" < <(builtin printf '%b' "$__rbx_in")
		else
			builtin source "$__rbx_path" </dev/null
		fi
		__rbx_status=$?
	else
		__rbx_status="$?c"
	fi
	builtin printf '%s' "$__rbx_marker" >&"$__rbx_out"
	builtin printf '%s%s\036' "$__rbx_marker" "$__rbx_status" >&"$__rbx_err"
done
