package sandbox

import (
	"crypto/rand"
	"encoding/hex"
	"maps"
	"os"
	"strconv"
	"strings"
)

// Owner identifies the server process that created a box.
type Owner struct {
	Instance string
	Host     string
	PID      int
	Start    string
}

// CurrentOwner describes this process.
func CurrentOwner() Owner {
	host, _ := os.Hostname()
	b := make([]byte, 8)
	_, _ = rand.Read(b)
	return Owner{Instance: hex.EncodeToString(b), Host: host, PID: os.Getpid(), Start: processStart(os.Getpid())}
}

// Labels returns extra plus the owner's labels.
func (o Owner) Labels(extra map[string]string) map[string]string {
	l := map[string]string{
		LabelManaged:    "true",
		LabelInstance:   o.Instance,
		LabelOwnerHost:  o.Host,
		LabelOwnerPID:   strconv.Itoa(o.PID),
		LabelOwnerStart: o.Start,
	}
	maps.Copy(l, extra)
	return l
}

// processStart reads a process's start time from /proc, "" if unknown.
func processStart(pid int) string {
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		return ""
	}
	// The command name may hold spaces and parentheses; fields resume
	// after the last ')'. starttime is field 22, the 20th after it.
	s := string(b)
	i := strings.LastIndexByte(s, ')')
	if i < 0 {
		return ""
	}
	f := strings.Fields(s[i+1:])
	if len(f) < 20 {
		return ""
	}
	return f[19]
}

// ownerAlive says whether the process that labelled a box still runs. Only
// a box from this host can be judged; others are judged by age.
func ownerAlive(labels map[string]string, self Owner) (alive, known bool) {
	if labels[LabelOwnerHost] != self.Host {
		return false, false
	}
	if labels[LabelInstance] == self.Instance {
		return true, true
	}
	pid, err := strconv.Atoi(labels[LabelOwnerPID])
	if err != nil || pid <= 0 {
		return false, true
	}
	start := processStart(pid)
	return start != "" && start == labels[LabelOwnerStart], true
}
