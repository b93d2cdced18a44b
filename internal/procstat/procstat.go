package procstat

import (
	"os"
	"strconv"
	"strings"
)

// Field returns field n of /proc/pid/stat, numbered as proc(5) numbers
// them (n >= 3: state is 3, utime 14, stime 15, starttime 22), or "" when
// the process or the field is unknown.
func Field(pid, n int) string {
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if err != nil || n < 3 {
		return ""
	}
	// Fields resume after the command name's last ')'.
	s := string(b)
	i := strings.LastIndexByte(s, ')')
	if i < 0 {
		return ""
	}
	f := strings.Fields(s[i+1:])
	if n-3 >= len(f) {
		return ""
	}
	return f[n-3]
}
