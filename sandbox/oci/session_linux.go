package oci

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"time"

	"github.com/runbox-mcp/runbox/internal/initproto"
	"github.com/runbox-mcp/runbox/sandbox"
)

// keptFile, in a box's bundle, names the state directory whose store keeps
// the box's run (MarkKept): runc's annotations are fixed at creation.
const keptFile = "kept"

// MarkKept marks box id as holding a run this server's store keeps, for
// the reapers of other state directories (Reap, sandbox.KeptElsewhere). An
// owner without a state directory marks nothing; a box already gone needs
// no mark.
func (o *OCI) MarkKept(_ context.Context, id string) error {
	if o.owner.State == "" {
		return nil
	}
	err := os.WriteFile(filepath.Join(o.dir, "boxes", id, keptFile), []byte(o.owner.State), 0o600)
	if errors.Is(err, os.ErrNotExist) {
		return nil
	}
	return err
}

// keptState reads a box's mark ("" for none).
func (o *OCI) keptState(id string) string {
	b, _ := os.ReadFile(filepath.Join(o.dir, "boxes", id, keptFile))
	return string(b)
}

// FindBoxes lists the running boxes that carry all of labels (an empty
// value: the label with any value), from their annotations.
func (o *OCI) FindBoxes(ctx context.Context, labels map[string]string) ([]sandbox.FoundBox, error) {
	if err := o.Ready(ctx); err != nil {
		return nil, err
	}
	states, err := o.list(ctx)
	if err != nil {
		return nil, &sandbox.EngineError{Msg: err.Error(), Hint: "Run `runbox doctor`."}
	}
	var out []sandbox.FoundBox
	for _, st := range states {
		if st.Status != "running" || st.Annotations[sandbox.LabelManaged] != "true" || !matches(st.Annotations, labels) {
			continue
		}
		out = append(out, sandbox.FoundBox{ID: st.ID, Labels: st.Annotations})
	}
	return out, nil
}

func matches(have, want map[string]string) bool {
	for k, v := range want {
		got, ok := have[k]
		if !ok || (v != "" && got != v) {
			return false
		}
	}
	return true
}

// relayWait bounds how long a box's relay may take to answer.
const relayWait = 10 * time.Second

// errRelayBusy: the channel that holds the box's stdin is still open.
var errRelayBusy = errors.New("a channel holds the box's stdin")

// Attach reaches a running box again through its relay
// (internal/initproto relay.go): `runc exec` of `runbox-init relay` in the
// box as uid 0, whose stdin and stdout become the box's channel once
// runbox-init answered ready. A box whose stdin an earlier channel still
// holds answers busy; it is asked once more a moment later, as it reads
// the end of that channel a little after it closed.
func (o *OCI) Attach(ctx context.Context, id string) (sandbox.Box, error) {
	if err := o.Ready(ctx); err != nil {
		return nil, err
	}
	if !isBoxID(id) {
		// An id read from a record names a bundle path and a runc
		// container: only this backend's own form may.
		return nil, &sandbox.EngineError{Msg: fmt.Sprintf("%q is not a box of the oci backend", id), Hint: "The record is not runbox's; open a new session."}
	}
	b, err := o.viaRelay(id)
	if errors.Is(err, errRelayBusy) {
		select {
		case <-time.After(250 * time.Millisecond):
		case <-ctx.Done():
			return nil, ctx.Err()
		}
		b, err = o.viaRelay(id)
	}
	if err != nil {
		return nil, &sandbox.EngineError{Msg: fmt.Sprintf("reaching box %s again: %v", id, err), Hint: "The box may have ended; open a new session."}
	}
	return b, nil
}

func (o *OCI) viaRelay(id string) (*box, error) {
	b := &box{o: o, id: id, bundle: filepath.Join(o.dir, "boxes", id), exited: make(chan struct{}),
		diag: &sandbox.Capped{Max: 16 << 10}, attached: true}
	if err := b.start(exec.Command(o.runc, o.rt("exec", "--user", "0:0", id, sandbox.InitPath, initproto.RelayArg)...)); err != nil {
		return nil, err
	}
	fail := func(err error) (*box, error) {
		_ = b.in.Close()
		_ = b.out.Close()
		select {
		case <-b.exited:
		case <-time.After(sandbox.KillTimeout):
			_ = b.cmd.Process.Kill()
		}
		return nil, err
	}
	_ = b.out.SetReadDeadline(time.Now().Add(relayWait))
	var answer [1]byte
	_, err := b.out.Read(answer[:])
	_ = b.out.SetReadDeadline(time.Time{})
	switch {
	case err != nil:
		<-b.drained
		if msg := b.diag.String(); msg != "" {
			err = errors.New(msg)
		}
		return fail(err)
	case answer[0] == initproto.RelayBusy:
		return fail(errRelayBusy)
	case answer[0] != initproto.RelayReady:
		return fail(fmt.Errorf("the box answered %q", answer[0]))
	}
	return b, nil
}
