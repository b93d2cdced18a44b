package procstat

import (
	"os"
	"strconv"
	"strings"
)

// Stat is one read of /proc/pid/stat.
type Stat struct {
	// Comm is the command name, what stands between the first '(' and
	// the last ')'.
	Comm   string
	fields []string // from state (field 3) on
}

// Read reads /proc/pid/stat once; ok is false when the process is unknown.
func Read(pid int) (Stat, bool) {
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		return Stat{}, false
	}
	return Parse(b)
}

// Parse reads the content of a /proc/pid/stat file; ok is false when it is
// not one.
func Parse(b []byte) (Stat, bool) {
	// Fields resume after the command name's last ')'.
	s := string(b)
	i, j := strings.IndexByte(s, '('), strings.LastIndexByte(s, ')')
	if i < 0 || j < i {
		return Stat{}, false
	}
	return Stat{Comm: s[i+1 : j], fields: strings.Fields(s[j+1:])}, true
}

// Field returns field n, numbered as proc(5) numbers them (n >= 3: state
// is 3, utime 14, stime 15, starttime 22), or "" when there is none.
func (s Stat) Field(n int) string {
	if n < 3 || n-3 >= len(s.fields) {
		return ""
	}
	return s.fields[n-3]
}

// Field returns field n of /proc/pid/stat (Stat.Field), or "" when the
// process or the field is unknown.
func Field(pid, n int) string {
	s, _ := Read(pid)
	return s.Field(n)
}
