# runbox session driver for bash: one shell; each cell is sourced, so
# variables, functions and the working directory persist. runbox-init
# writes "length marker code-path" per cell on descriptor 4, and then the
# cell's stdin as that many characters of printf %b text (a pipe: nothing
# is written to the box's writable space, which a cell may fill); the cell
# ends with the marker on stdout, and on stderr the marker, the status
# ("c" after it when the syntax check refused the cell) and "\x1e". An
# interrupt returns from the cell.
trap 'return 130 2>/dev/null' INT
while IFS=' ' read -r __rbx_n __rbx_marker __rbx_path <&4; do
	__rbx_in=
	if [ "$__rbx_n" != 0 ]; then
		read -r -N "$__rbx_n" __rbx_in <&4
	fi
	if bash -n "$__rbx_path"; then
		if [ -n "$__rbx_in" ]; then
			source "$__rbx_path" < <(printf '%b' "$__rbx_in")
		else
			source "$__rbx_path" </dev/null
		fi
		__rbx_status=$?
	else
		__rbx_status="$?c"
	fi
	printf '%s' "$__rbx_marker"
	printf '%s%s\036' "$__rbx_marker" "$__rbx_status" >&2
done
