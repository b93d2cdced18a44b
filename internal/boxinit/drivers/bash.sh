# runbox session driver for bash: one shell; each cell is sourced, so
# variables, functions and the working directory persist. runbox-init
# writes "stdin-path marker code-path" per cell on descriptor 4; the cell
# ends with the marker on stdout, and on stderr the marker, the status
# ("c" after it when the syntax check refused the cell) and "\x1e". An
# interrupt returns from the cell.
trap 'return 130 2>/dev/null' INT
while IFS=' ' read -r __rbx_stdin __rbx_marker __rbx_path <&4; do
	if bash -n "$__rbx_path"; then
		source "$__rbx_path" <"$__rbx_stdin"
		__rbx_status=$?
	else
		__rbx_status="$?c"
	fi
	printf '%s' "$__rbx_marker"
	printf '%s%s\036' "$__rbx_marker" "$__rbx_status" >&2
done
