package sandbox

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"time"

	"github.com/runbox-mcp/runbox/contract"
)

// Checkpointer is a Driver whose boxes can be saved with their memory and
// started again from what was saved (gVisor's runsc on the oci backend).
// Other drivers' sessions are checkpointed as their cells and restored by
// replaying them.
type Checkpointer interface {
	// KeepsMemory says whether this driver's boxes can be saved.
	KeepsMemory() bool
	// Checkpoint saves running box id into the directory dir; the box
	// ends.
	Checkpoint(ctx context.Context, id, dir string) error
	// Restore starts a new box of spec from the image in dir.
	Restore(ctx context.Context, spec BoxSpec, dir string) (Box, error)
}

// CheckpointTimeout bounds one checkpoint or restore of a box.
const CheckpointTimeout = 2 * time.Minute

// maxCellBytes bounds the cell sources a session keeps for a replay.
const maxCellBytes = 4 << 20

// CheckpointInfo is a checkpoint taken.
type CheckpointInfo struct {
	ID       string `json:"checkpoint_id" jsonschema:"description=Pass it to session_restore. Only you can use it."`
	Language string `json:"language"`
	// Keeps is what a restore gets back: memory, or the cells to replay.
	Keeps     string    `json:"keeps" jsonschema:"enum=memory,enum=cells,description=memory: the interpreter itself is saved (variables, imports, open files, /workspace); cells: the session's cells are kept and a restore runs them again in a new interpreter."`
	Cells     int       `json:"cells"`
	Bytes     int64     `json:"size_bytes"`
	CreatedAt time.Time `json:"created_at"`
	ExpiresAt time.Time `json:"expires_at"`
}

// RestoreInfo is a session restored from a checkpoint, or forked.
type RestoreInfo struct {
	Session contract.SessionInfo `json:"session"`
	// Restored says how: the memory itself, or a replay of the cells.
	Restored string `json:"restored" jsonschema:"enum=memory,enum=replayed"`
	// Replayed counts the cells run again; Failed are those that failed.
	Replayed int            `json:"cells_replayed,omitempty"`
	Failed   []ReplayFailed `json:"cells_failed,omitempty"`
}

// ReplayFailed is a cell that failed when it was run again.
type ReplayFailed struct {
	Cell  int                 `json:"cell" jsonschema:"description=Its place among the session's cells, from 1."`
	Error *contract.ErrorInfo `json:"error"`
}

// CheckpointRunner is a Runner that checkpoints, restores and forks
// sessions.
type CheckpointRunner interface {
	CheckpointSession(ctx context.Context, id, client string) (CheckpointInfo, *contract.ErrorInfo)
	RestoreSession(ctx context.Context, checkpointID, client string) (RestoreInfo, *contract.ErrorInfo)
	ForkSession(ctx context.Context, id, client string) (RestoreInfo, *contract.ErrorInfo)
}

var _ CheckpointRunner = (*BoxRunner)(nil)

// Checkpoints is the runner itself when it keeps checkpoints, else nil.
func (r *BoxRunner) Checkpoints() CheckpointRunner {
	if r.ckpt == nil || !r.m.Sessions.Enabled {
		return nil
	}
	return r
}

// keepsMemory says whether this runner's boxes can be saved.
func (r *BoxRunner) keepsMemory() (Checkpointer, bool) {
	cp, ok := r.d.(Checkpointer)
	return cp, ok && cp.KeepsMemory()
}

// startSession starts a session's box, or restores it from image.
func (r *BoxRunner) startSession(ctx context.Context, image string, spec BoxSpec) (Box, error) {
	if image == "" {
		return r.start(ctx, spec)
	}
	cp, ok := r.keepsMemory()
	if !ok {
		return nil, errors.New("this backend keeps no memory")
	}
	b, err := cp.Restore(ctx, spec, image)
	if err != nil {
		return nil, err
	}
	r.alive.Add(1)
	return b, nil
}

// sessionSpec is the box of session ls.
func (r *BoxRunner) sessionSpec(ls *liveSession) BoxSpec {
	lim := ls.limits
	return BoxSpec{Language: ls.lang, Lifetime: time.Until(ls.ends) + backstopGrace, Session: true, Limits: &lim, Mounts: ls.mounts,
		InitArgs: sessionArgs(r.m, ls.lang, r.d.Isolation(), r.caPEM(), false, directChannels(r.d)),
		Labels: r.owner.Labels(map[string]string{LabelLanguage: ls.lang.Name, LabelSession: ls.key,
			LabelSessionClient: clientKey(ls.client), LabelSessionExpires: strconv.FormatInt(ls.ends.Unix(), 10)})}
}

// keepCell keeps a cell's source for a replay, within maxCellBytes; past
// it the session keeps none (a replay would differ).
func (s *sessions) keepCell(ls *liveSession, code string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if ls.cellBytes+len(code) > maxCellBytes {
		ls.cells, ls.cellBytes = nil, maxCellBytes+1
		return
	}
	ls.cells = append(ls.cells, code)
	ls.cellBytes += len(code)
}

// held finds client's session id and takes its turn; release gives it
// back.
func (r *BoxRunner) held(ctx context.Context, id, client string) (*liveSession, func(), *contract.ErrorInfo) {
	s := r.sessionsOf()
	ls, gone := s.find(ctx, id, client)
	if ls == nil {
		if gone != "" {
			return nil, nil, ptr(contract.SessionGone(gone))
		}
		return nil, nil, ptr(contract.NoSession())
	}
	select {
	case <-ls.turn:
	case <-ctx.Done():
		return nil, nil, ptr(contract.Cancelled())
	}
	s.mu.Lock()
	if s.live[ls.key] != ls {
		s.mu.Unlock()
		ls.turn <- struct{}{}
		return nil, nil, ptr(contract.NoSession())
	}
	if ls.workspace != "" {
		s.mu.Unlock()
		ls.turn <- struct{}{}
		// Its /workspace is a host folder with one writer at a time: a
		// copy would share it, a checkpoint would not hold it.
		return nil, nil, ptr(contract.Invalid("session %s has the named workspace %q: a session with a named workspace is not checkpointed or forked (its files are kept in the workspace)", id, ls.workspace))
	}
	ls.busy = true
	s.mu.Unlock()
	return ls, func() {
		s.mu.Lock()
		ls.busy, ls.lastUsed = false, time.Now()
		s.mu.Unlock()
		ls.turn <- struct{}{}
	}, nil
}

// saveMemory saves session ls's box into dir and brings the session back
// in a new box restored from it: the session goes on, as it was. Called
// in ls's turn. A session whose box does not come back is lost, and said
// so; the image in dir is whole either way.
func (r *BoxRunner) saveMemory(ctx context.Context, cp Checkpointer, ls *liveSession, dir string) (lost string, err error) {
	// The channel stays open while the box is saved: runbox-init, reading
	// it then, reads the restored box's stdin (a channel that ended would
	// have sent it to its relay), and a new channel's reset starts afresh.
	if err := r.save(ctx, cp, ls, dir); err != nil {
		// The box may have ended or not: the session's next call says.
		return "", err
	}
	return r.bringBack(ctx, cp, ls, dir), nil
}

// bringBack restores session ls into a new box from the image in dir,
// just saved; a session whose box does not come back is lost, and said
// so. Called in ls's turn.
func (r *BoxRunner) bringBack(ctx context.Context, cp Checkpointer, ls *liveSession, dir string) (lost string) {
	s := r.sessionsOf()
	b, err := cp.Restore(context.WithoutCancel(ctx), r.sessionSpec(ls), dir)
	if err == nil {
		r.alive.Add(1)
		old, live := s.setLiveBox(ls, b)
		if !live {
			// The session ended meanwhile (the server closes), its saved
			// box with it: the new box goes too.
			s.drop(b)
			return ""
		}
		r.remove(old)
		ls.ch, err = r.connectSession(context.WithoutCancel(ctx), ls)
	}
	if err != nil {
		lost = "its box did not come back after the checkpoint: " + err.Error()
		s.end(ls, lost, true)
	}
	return lost
}

// save saves session ls's box into dir (the box ends); bringBack
// restores it and removes the saved box, which stays the session's until
// then, so that a session ended meanwhile removes it once. Called in
// ls's turn.
func (r *BoxRunner) save(ctx context.Context, cp Checkpointer, ls *liveSession, dir string) error {
	s := r.sessionsOf()
	s.mu.Lock()
	old := ls.box
	s.mu.Unlock()
	if err := cp.Checkpoint(ctx, old.ID(), dir); err != nil {
		return err
	}
	if ls.ch != nil {
		ls.ch.close()
		ls.ch = nil
	}
	return nil
}

// CheckpointSession saves client's session id in the state directory:
// its interpreter's memory where the driver keeps it (the session is
// paused meanwhile and goes on), otherwise its cells.
func (r *BoxRunner) CheckpointSession(ctx context.Context, id, client string) (CheckpointInfo, *contract.ErrorInfo) {
	if r.ckpt == nil {
		return CheckpointInfo{}, ptr(contract.Invalid("checkpoints are off on this server (manifest checkpoints.enabled, and a state directory)"))
	}
	ls, release, fail := r.held(ctx, id, client)
	if fail != nil {
		return CheckpointInfo{}, fail
	}
	defer release()
	cp, memory := r.keepsMemory()
	s := r.sessionsOf()
	s.mu.Lock()
	cells, cut := append([]string(nil), ls.cells...), ls.cellBytes > maxCellBytes
	s.mu.Unlock()
	if !memory && cut {
		return CheckpointInfo{}, noReplay()
	}
	admitted, full := r.ckpt.admit(client)
	if full != nil {
		return CheckpointInfo{}, full
	}
	defer admitted()
	tmp, err := r.ckpt.begin()
	if err != nil {
		return CheckpointInfo{}, ptr(contract.SandboxFailed("the checkpoint could not be written: " + err.Error()))
	}
	defer os.RemoveAll(tmp)
	if memory {
		lost, err := r.saveMemory(ctx, cp, ls, filepath.Join(tmp, ckImage))
		if err != nil {
			return CheckpointInfo{}, engineFail(contract.Job{}, err).Error
		}
		if lost != "" {
			r.log.Warn("a checkpointed session was lost", "why", lost)
		}
	}
	now := time.Now()
	rec := ckRecord{Version: ckVersion, Client: clientKey(client), Session: ls.key, Language: ls.lang.Name, Memory: memory,
		Limits: ls.limits, Mounts: ls.mounts, Cells: cells, Created: now, Expires: now.Add(r.ckpt.c.MaxAge())}
	ckID := newCheckpointID()
	if full, err := r.ckpt.commit(tmp, ckID, rec); full != nil || err != nil {
		if err != nil {
			return CheckpointInfo{}, ptr(contract.SandboxFailed("the checkpoint could not be written: " + err.Error()))
		}
		return CheckpointInfo{}, full
	}
	keeps := "cells"
	if memory {
		keeps = "memory"
	}
	bytes := int64(0)
	if _, _, bad := r.ckpt.open(ckID, client); bad == nil {
		bytes = dirBytes(filepath.Join(r.ckpt.dir, sessionKey(ckID)))
	}
	return CheckpointInfo{ID: ckID, Language: ls.lang.Name, Keeps: keeps, Cells: len(cells), Bytes: bytes, CreatedAt: now, ExpiresAt: rec.Expires}, nil
}

// RestoreSession opens a new session of client's from checkpoint id,
// verified first: a checkpoint changed on disk is refused, never run.
func (r *BoxRunner) RestoreSession(ctx context.Context, id, client string) (RestoreInfo, *contract.ErrorInfo) {
	if r.ckpt == nil {
		return RestoreInfo{}, ptr(contract.Invalid("checkpoints are off on this server (manifest checkpoints.enabled, and a state directory)"))
	}
	rec, dir, fail := r.ckpt.open(id, client)
	if fail != nil {
		return RestoreInfo{}, fail
	}
	lang, ok := r.m.Language(rec.Language)
	if !ok {
		return RestoreInfo{}, ptr(contract.Invalid("the checkpoint's language %q is not on this server any more", rec.Language))
	}
	req := SessionRequest{Language: lang, Client: client, Limits: rec.Limits, Mounts: rec.Mounts}
	if rec.Memory {
		if _, ok := r.keepsMemory(); !ok {
			return r.replay(ctx, req, rec.Cells)
		}
		req.image = filepath.Join(dir, ckImage)
		info, fail := r.OpenSession(ctx, req)
		if fail != nil {
			return RestoreInfo{}, fail
		}
		r.setCells(info.ID, rec.Cells)
		return RestoreInfo{Session: info, Restored: contract.RestoredMemory}, nil
	}
	return r.replay(ctx, req, rec.Cells)
}

// ForkSession opens a new session of client's with the state of session
// id, which goes on: a copy of its memory where the driver keeps it,
// otherwise a replay of its cells. The two share nothing writable.
func (r *BoxRunner) ForkSession(ctx context.Context, id, client string) (RestoreInfo, *contract.ErrorInfo) {
	ls, release, fail := r.held(ctx, id, client)
	if fail != nil {
		return RestoreInfo{}, fail
	}
	s := r.sessionsOf()
	s.mu.Lock()
	cells, cut := append([]string(nil), ls.cells...), ls.cellBytes > maxCellBytes
	s.mu.Unlock()
	req := SessionRequest{Language: ls.lang, Client: client, Limits: ls.limits, Mounts: ls.mounts,
		IdleTTL: ls.idle, Lifetime: time.Until(ls.ends)}
	cp, memory := r.keepsMemory()
	if !memory {
		release()
		if cut {
			return RestoreInfo{}, noReplay()
		}
		return r.replay(ctx, req, cells)
	}
	// The image is the fork's only: it lives under the checkpoints'
	// directory while the fork starts, and goes.
	tmp, err := os.MkdirTemp(filepath.Join(os.TempDir()), "runbox-fork-")
	if r.ckpt != nil {
		tmp, err = r.ckpt.begin()
	}
	if err != nil {
		release()
		return RestoreInfo{}, ptr(contract.SandboxFailed("the fork's image could not be written: " + err.Error()))
	}
	image := filepath.Join(tmp, ckImage)
	start := time.Now()
	if err := r.save(ctx, cp, ls, image); err != nil {
		os.RemoveAll(tmp)
		release()
		return RestoreInfo{}, engineFail(contract.Job{}, err).Error
	}
	saved := time.Since(start)
	// The fork is restored first, alone: a restore takes what CPU there
	// is, and two at once each took as long as both one after the other.
	// The fork is answered as soon as it is ready; the original comes
	// back after it, holding its turn until then (its next call waits),
	// and the image goes once both have read it. Close waits for it.
	req.image = image
	info, fail := r.OpenSession(ctx, req)
	ready := time.Since(start)
	r.bg.Add(1)
	go func() {
		defer r.bg.Done()
		defer os.RemoveAll(tmp)
		defer release()
		if lost := r.bringBack(ctx, cp, ls, image); lost != "" {
			r.log.Warn("a forked session was lost", "why", lost)
		}
		r.log.Debug("fork timings", "checkpoint", saved, "fork_ready", ready, "original_back", time.Since(start))
	}()
	if fail != nil {
		return RestoreInfo{}, fail
	}
	r.setCells(info.ID, cells)
	return RestoreInfo{Session: info, Restored: contract.RestoredMemory}, nil
}

func (r *BoxRunner) setCells(id string, cells []string) {
	s := r.sessionsOf()
	s.mu.Lock()
	defer s.mu.Unlock()
	if ls := s.live[sessionKey(id)]; ls != nil {
		ls.cells = cells
		for _, c := range cells {
			ls.cellBytes += len(c)
		}
	}
}

// replay opens a new session and runs cells in it again, in order; it
// says which failed. A cell that loses the session ends the replay.
func (r *BoxRunner) replay(ctx context.Context, req SessionRequest, cells []string) (RestoreInfo, *contract.ErrorInfo) {
	info, fail := r.OpenSession(ctx, req)
	if fail != nil {
		return RestoreInfo{}, fail
	}
	out := RestoreInfo{Restored: contract.RestoredReplayed}
	for i, code := range cells {
		res := r.RunInSession(ctx, info.ID, req.Client, RunRequest{Job: contract.Job{RunID: fmt.Sprintf("replay-%d", i+1),
			Language: req.Language, Code: code, Timeout: r.m.Limits.MaxTimeout()}})
		out.Replayed++
		if res.Status != contract.StatusOK {
			out.Failed = append(out.Failed, ReplayFailed{Cell: i + 1, Error: res.Error})
		}
		if res.Session != nil && res.Session.State == contract.SessionLost {
			break
		}
	}
	s := r.sessionsOf()
	s.mu.Lock()
	if ls := s.live[sessionKey(info.ID)]; ls != nil {
		info = s.info(ls)
	}
	s.mu.Unlock()
	out.Session = info
	return out, nil
}

// noReplay refuses to replay a session whose cells this server does not
// all hold: a replay would silently differ.
func noReplay() *contract.ErrorInfo {
	return ptr(contract.Invalid("this server does not hold all of this session's cells (they passed the %d bytes a replay keeps, or the session was opened before the server restarted), and this backend keeps no memory", maxCellBytes))
}
