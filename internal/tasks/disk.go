package tasks

import (
	"encoding/json"
	"errors"

	"github.com/runbox-mcp/runbox/internal/runstore"
)

// diskKind is the tasks' record kind in the run store.
const diskKind = "task"

// Disk is a Store in the run store (the state directory): tasks outlive
// the server process, within the run store's bounds (shared with the
// long runs' records).
type Disk struct{ s *runstore.Store }

// NewDisk returns the tasks kept in s.
func NewDisk(s *runstore.Store) *Disk { return &Disk{s: s} }

// Put implements Store.
func (d *Disk) Put(t Task) error {
	data, err := json.Marshal(t)
	if err != nil {
		return err
	}
	err = d.s.Put(runstore.Entry{Kind: diskKind, ID: t.ID, Finished: t.Status.Terminal(), Updated: t.Updated, Data: data})
	if errors.Is(err, runstore.ErrFull) {
		return ErrFull
	}
	return err
}

// Get implements Store.
func (d *Disk) Get(id string) (Task, bool) {
	e, ok := d.s.Get(diskKind, id)
	if !ok {
		return Task{}, false
	}
	var t Task
	if json.Unmarshal(e.Data, &t) != nil || t.ID != id {
		return Task{}, false
	}
	return t, true
}

// Delete implements Store.
func (d *Disk) Delete(id string) { d.s.Delete(diskKind, id) }

// List implements Store.
func (d *Disk) List() []Task {
	var out []Task
	for _, e := range d.s.List(diskKind) {
		var t Task
		if json.Unmarshal(e.Data, &t) == nil && t.ID == e.ID {
			out = append(out, t)
		}
	}
	return out
}

// Hold takes task id for this process while its call runs here (or is
// adopted here): a task no live server holds, and not finished, is one
// whose server stopped (runstore.Store.Hold).
func (d *Disk) Hold(id string) (release func(), ok bool) { return d.s.Hold(diskKind, id) }
