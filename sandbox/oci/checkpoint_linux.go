package oci

import (
	"context"
	"fmt"
	"os/exec"
	"path/filepath"
	"strings"
	"time"

	"github.com/runbox-mcp/runbox/sandbox"
)

var _ sandbox.Checkpointer = (*OCI)(nil)

// KeepsMemory says whether boxes can be checkpointed with their memory:
// under runsc, which saves the whole sandbox (the interpreter, its open
// files, the /workspace and /tmp file systems it holds in memory). runc's
// checkpoint needs CRIU, which fails on many kernels: runc boxes replay.
func (o *OCI) KeepsMemory() bool { return o.gvisor() }

// Checkpoint saves box id into dir (`runsc checkpoint`); the box ends.
func (o *OCI) Checkpoint(ctx context.Context, id, dir string) error {
	if !o.gvisor() {
		return fmt.Errorf("boxes under %s keep no memory", o.m.Isolation)
	}
	if !isBoxID(id) {
		return fmt.Errorf("%q is not a box of the oci backend", id)
	}
	ctx, cancel := context.WithTimeout(ctx, sandbox.CheckpointTimeout)
	defer cancel()
	start := time.Now()
	out, err := exec.CommandContext(ctx, o.runc, o.rt("checkpoint", "--image-path", dir, id)...).CombinedOutput()
	o.log.Debug("runsc checkpoint", "box", id, "took", time.Since(start))
	if err != nil {
		return fmt.Errorf("runsc checkpoint: %v: %s", err, strings.TrimSpace(string(out)))
	}
	return nil
}

// Restore starts a new box of spec from the image in dir (`runsc
// restore` of a bundle written as Start writes one): the saved sandbox
// goes on in it, with the new box's stdin and stdout as its channel.
func (o *OCI) Restore(ctx context.Context, spec sandbox.BoxSpec, dir string) (sandbox.Box, error) {
	if !o.gvisor() {
		return nil, &sandbox.EngineError{Msg: "boxes under " + o.m.Isolation + " keep no memory", Hint: "Restore replays the session's cells instead."}
	}
	start := time.Now()
	b, s, err := o.newBox(ctx, spec)
	if err != nil {
		return nil, err
	}
	defer func() { o.log.Debug("runsc restore started", "box", b.id, "setup", time.Since(start)) }()
	err = b.launch(s, func() *exec.Cmd {
		return exec.Command(o.runc, o.rt("restore", "--image-path", dir, "--bundle", b.bundle, "--pid-file", filepath.Join(b.bundle, "pid"), b.id)...)
	})
	if err != nil {
		b.Remove()
		return nil, &sandbox.EngineError{Msg: "restoring a box with runsc: " + err.Error(), Hint: "Run `runbox doctor`; check runsc and " + o.dir + "."}
	}
	o.mu.Lock()
	o.live[b.id] = b
	o.mu.Unlock()
	return b, nil
}
