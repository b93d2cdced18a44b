package sandbox

import (
	"crypto/rand"
	"crypto/sha256"
	"encoding/hex"
	"maps"
	"os"
	"path/filepath"
	"strconv"

	"github.com/runbox-mcp/runbox/internal/procstat"
)

// Owner identifies the server process that created a box.
type Owner struct {
	Instance string
	Host     string
	PID      int
	Start    string
	// State names the state directory whose run store keeps this
	// server's runs ([StateKey]), "" for none: a box holding one of them
	// is marked with it ([Driver].MarkKept).
	State string
}

// StateKey names a state directory in a mark: a hash of its path.
func StateKey(dir string) string {
	if abs, err := filepath.Abs(dir); err == nil {
		dir = abs
	}
	sum := sha256.Sum256([]byte("runbox-state:" + filepath.Clean(dir)))
	return hex.EncodeToString(sum[:8])
}

// KeptElsewhere says whether a box marked as holding a run that the store
// of state keeps ([LabelKept]) belongs to another state directory than
// self's. A reaper judges such a box of a dead owner by its age, as
// another host's, since a server restarted on that directory may adopt
// its run; a box of self's own directory is held by [Options].Keep while
// its record is.
func KeptElsewhere(state string, self Owner) bool {
	return state != "" && state != self.State
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
