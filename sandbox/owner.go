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
	// server's runs (StateKey), "" for none.
	State string
}

// StateKey names a state directory in a label: a hash of its path.
func StateKey(dir string) string {
	if abs, err := filepath.Abs(dir); err == nil {
		dir = abs
	}
	sum := sha256.Sum256([]byte("runbox-state:" + dir))
	return hex.EncodeToString(sum[:8])
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
	if o.State != "" {
		l[LabelOwnerState] = o.State
	}
	maps.Copy(l, extra)
	return l
}

// processStart reads a process's start time from /proc, "" if unknown.
func processStart(pid int) string {
	return procstat.Field(pid, 22)
}

// OwnerAlive says whether the process that labelled a box still runs. Only
// a box from this host can be judged; others are judged by age. So is a
// box whose dead owner kept its runs in another state directory than
// self's: a server restarted on that one may adopt its run (a box whose
// run this server's store keeps is held by Options.Keep).
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
	if start != "" && start == labels[LabelOwnerStart] {
		return true, true
	}
	if st := labels[LabelOwnerState]; st != "" && st != self.State {
		return false, false
	}
	return false, true
}
