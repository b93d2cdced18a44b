package sandbox

import (
	"crypto/rand"
	"encoding/hex"
	"maps"
	"os"
	"strconv"

	"github.com/runbox-mcp/runbox/internal/procstat"
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
	return procstat.Field(pid, 22)
}

// OwnerAlive says whether the process that labelled a box still runs. Only
// a box from this host can be judged; others are judged by age.
func OwnerAlive(labels map[string]string, self Owner) (alive, known bool) {
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
