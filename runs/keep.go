package runs

import (
	"encoding/json"
	"sync"
	"time"

	"github.com/runbox-mcp/runbox/internal/runstore"
)

// Record kinds in the run store that hold a run's box (the record's
// "detached" field, a sandbox.Detached).
const (
	// RecordRun is a run answered with a handle, by run id.
	RecordRun = "run"
	// RecordTaskRun is the run of an MCP task's call, by task id.
	RecordTaskRun = "taskrun"
)

// KeepsBox says, from store's records, whether a run the records hold
// runs in box id: a restarted server's reaper must leave that box to be
// adopted (sandbox.Options.Keep). Records are read again at most every
// few seconds.
func KeepsBox(store *runstore.Store) func(boxID string) bool {
	var mu sync.Mutex
	var read time.Time
	var boxes map[string]bool
	return func(id string) bool {
		mu.Lock()
		defer mu.Unlock()
		if boxes == nil || time.Since(read) > 5*time.Second {
			boxes, read = map[string]bool{}, time.Now()
			for _, kind := range []string{RecordRun, RecordTaskRun} {
				for _, e := range store.List(kind) {
					var rec Record
					if !e.Finished && json.Unmarshal(e.Data, &rec) == nil && rec.Detached != nil {
						boxes[rec.Detached.BoxID] = true
					}
				}
			}
		}
		return boxes[id]
	}
}
