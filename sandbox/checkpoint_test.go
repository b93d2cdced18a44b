package sandbox

import (
	"context"
	"testing"
	"time"

	"github.com/runbox-mcp/runbox/contract"
)

// TestCheckpointReplays: a driver that keeps no memory checkpoints a
// session as its cells, and a restore and a fork run them again in a new
// session, said so; another client's checkpoint is not found; a session
// adopted after a restart, whose cells this server never saw, is refused
// rather than replayed into a different state.
func TestCheckpointReplays(t *testing.T) {
	ctx := context.Background()
	d, r, m := sessionRunner(t, nil)
	r.ckpt = &checkpoints{dir: t.TempDir(), c: m.Checkpoints}
	lang, _ := m.Language("python")
	info, fail := r.OpenSession(ctx, SessionRequest{Language: lang, Client: "c", Limits: m.SessionLimits()})
	if fail != nil {
		t.Fatal(fail)
	}
	job := testJob(t, m, time.Second)
	for _, code := range []string{"a", "b"} {
		job.Code = code
		r.RunInSession(ctx, info.ID, "c", RunRequest{Job: job})
	}
	ck, fail := r.CheckpointSession(ctx, info.ID, "c")
	if fail != nil || ck.Keeps != "cells" || ck.Cells != 2 {
		t.Fatalf("checkpoint: %+v %+v", fail, ck)
	}
	if _, fail := r.RestoreSession(ctx, ck.ID, "other"); fail == nil || fail.Kind != contract.KindCheckpointNotFound {
		t.Fatalf("another client: %+v", fail)
	}
	var opened []string
	for _, how := range []string{"restore", "fork"} {
		var ri RestoreInfo
		if how == "restore" {
			ri, fail = r.RestoreSession(ctx, ck.ID, "c")
		} else {
			ri, fail = r.ForkSession(ctx, info.ID, "c")
		}
		if fail != nil || ri.Restored != contract.RestoredReplayed || ri.Replayed != 2 || len(ri.Failed) != 0 {
			t.Fatalf("%s: %+v %+v", how, fail, ri)
		}
		job.Code = how
		if res := r.RunInSession(ctx, ri.Session.ID, "c", RunRequest{Job: job}); res.Stdout != "a;b;"+how {
			t.Errorf("%s: the new session answers %q", how, res.Stdout)
		}
		opened = append(opened, ri.Session.ID)
	}
	// The original goes on, untouched by its fork.
	job.Code = "c"
	if res := r.RunInSession(ctx, info.ID, "c", RunRequest{Job: job}); res.Stdout != "a;b;c" {
		t.Errorf("the original: %q", res.Stdout)
	}
	// A second runner over the same platform adopts the session: it
	// never saw its cells.
	r2 := New(d, Options{Manifest: m})
	defer r2.Close()
	r2.ckpt = &checkpoints{dir: t.TempDir(), c: m.Checkpoints}
	if _, fail := r2.CheckpointSession(ctx, info.ID, "c"); fail == nil || fail.Kind != contract.KindInvalidRequest {
		t.Fatalf("an adopted session's checkpoint: %+v", fail)
	}
	r.sessionsOf().mu.Lock()
	delete(r.sessionsOf().live, sessionKey(info.ID)) // r2 owns it now
	r.sessionsOf().mu.Unlock()
	r.alive.Add(-1)
	_ = r2.CloseSession(ctx, info.ID, "c")
	for _, id := range opened {
		_ = r.CloseSession(ctx, id, "c")
	}
}
