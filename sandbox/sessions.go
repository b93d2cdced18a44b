package sandbox

import (
	"context"
	"errors"
	"sort"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/runbox-mcp/runbox/contract"
	"github.com/runbox-mcp/runbox/manifest"
)

// SessionRequest is what session_open asks for.
type SessionRequest struct {
	Language manifest.Language
	// Client names the caller; only it may use the session.
	Client string
	// IdleTTL and Lifetime, when set, shorten the manifest's.
	IdleTTL, Lifetime time.Duration
	// Limits are the box's limits (the manifest's session limits or less).
	Limits manifest.Limits
	// Mounts are host folders the box sees read-only besides the
	// manifest's (a client's roots), for the session's life.
	Mounts []HostMount
	// Workspace names the caller's workspace the box gets as /workspace
	// (workspace.go); "": a tmpfs, as a one-off box's.
	Workspace string
	// image, when set, is a checkpoint's image the box is restored from
	// (checkpoint.go) instead of started.
	image string
}

// SessionStats count sessions, for metrics.
type SessionStats struct {
	Open   int
	Opened int64
	Lost   int64
	Calls  int64
}

// sessions are the runner's open sessions and the recently ended ones.
type sessions struct {
	r  *BoxRunner
	mu sync.Mutex
	// live by key; gone: key → why, until the session would have expired.
	live map[string]*liveSession
	gone map[string]tomb
	// reserved counts opens under way, in all and per client.
	reserved   int
	reservedBy map[string]int
	once       sync.Once
	stop       chan struct{}

	opened, lost, calls int64
}

type tomb struct {
	why, client string
	until       time.Time
}

type liveSession struct {
	key, id, client string
	lang            manifest.Language
	limits          manifest.Limits
	idle            time.Duration
	opened, ends    time.Time
	roots           []contract.Root
	workspace       string

	// turn lets one call at a time use the session.
	turn chan struct{}

	// Under sessions.mu:
	box      Box
	lastUsed time.Time
	calls    int
	busy     bool
	// running is the run id of the cell in progress, while busy.
	running string
	// cells are the sources of the calls that ran, in order, for a
	// restore that replays them (checkpoint.go); cellBytes their size.
	cells     []string
	cellBytes int
	mounts    []HostMount
	// log sums up the recent calls for a person's view (session_cells.go);
	// logged counts every call it took.
	log    []contract.SessionCell
	logged int

	// Under turn:
	ch *channel
	// live is ch, for what reaches the box without the turn (exposed
	// connections, expose.go); done closes when the session ends.
	live     atomic.Pointer[channel]
	doneOnce sync.Once
	done     chan struct{}
}

func (r *BoxRunner) sessionsOf() *sessions {
	r.sessOnce.Do(func() {
		r.sess = &sessions{r: r, live: map[string]*liveSession{}, gone: map[string]tomb{}, reservedBy: map[string]int{}, stop: make(chan struct{})}
	})
	return r.sess
}

// SessionStats reports the sessions' counts.
func (r *BoxRunner) SessionStats() SessionStats {
	s := r.sessionsOf()
	s.mu.Lock()
	defer s.mu.Unlock()
	return SessionStats{Open: len(s.live), Opened: s.opened, Lost: s.lost, Calls: s.calls}
}

// OpenSession starts a session box and waits for its interpreter.
func (r *BoxRunner) OpenSession(ctx context.Context, req SessionRequest) (contract.SessionInfo, *contract.ErrorInfo) {
	s := r.sessionsOf()
	m := r.m.Sessions
	if !m.Enabled {
		return contract.SessionInfo{}, ptr(contract.Invalid("sessions are off on this server (manifest sessions.enabled)"))
	}
	// A place is reserved before the box starts, so concurrent opens
	// cannot pass the caps together.
	s.mu.Lock()
	mine := s.reservedBy[req.Client]
	for _, ls := range s.live {
		if ls.client == req.Client {
			mine++
		}
	}
	full := ""
	switch {
	case mine >= m.MaxPerClient:
		full = "this client"
	case len(s.live)+s.reserved >= m.MaxOpen:
		full = "this server"
	default:
		s.reserved++
		s.reservedBy[req.Client]++
	}
	s.mu.Unlock()
	if full != "" {
		limit := m.MaxPerClient
		if full == "this server" {
			limit = m.MaxOpen
		}
		return contract.SessionInfo{}, ptr(contract.SessionsFull(full, limit))
	}
	defer func() {
		s.mu.Lock()
		s.reserved--
		if s.reservedBy[req.Client]--; s.reservedBy[req.Client] <= 0 {
			delete(s.reservedBy, req.Client)
		}
		s.mu.Unlock()
	}()
	if err := r.d.Ready(ctx); err != nil {
		return contract.SessionInfo{}, engineFail(contract.Job{}, err).Error
	}
	if _, err := r.d.ImageDigest(ctx, req.Language.Image); err != nil {
		return contract.SessionInfo{}, engineFail(contract.Job{}, err).Error
	}
	idle, life := m.IdleTTL(), m.MaxLifetime()
	if req.IdleTTL > 0 && req.IdleTTL < idle {
		idle = req.IdleTTL
	}
	if req.Lifetime > 0 && req.Lifetime < life {
		life = req.Lifetime
	}
	idle = min(idle, life)
	now := time.Now()
	id := newSessionID()
	ls := &liveSession{key: sessionKey(id), id: id, client: req.Client, lang: req.Language, limits: req.Limits,
		idle: idle, opened: now, ends: now.Add(life), lastUsed: now, turn: make(chan struct{}, 1), roots: Roots(req.Mounts), workspace: req.Workspace,
		mounts: req.Mounts}
	lim := req.Limits
	labels := map[string]string{LabelLanguage: req.Language.Name, LabelSession: ls.key,
		LabelSessionClient: clientKey(req.Client), LabelSessionExpires: strconv.FormatInt(ls.ends.Unix(), 10)}
	ws, fail := r.holdWorkspace(ctx, req, labels)
	if fail != nil {
		return contract.SessionInfo{}, fail
	}
	b, err := r.startSession(ctx, req.image, BoxSpec{Language: req.Language, Lifetime: life + backstopGrace, Session: true, Limits: &lim, Mounts: req.Mounts,
		InitArgs:  sessionArgs(r.m, req.Language, r.d.Isolation(), r.caPEM(), ws != nil, directChannels(r.d)),
		Labels:    r.owner.Labels(labels),
		Workspace: ws.mountPointOrNone(), WorkspaceVolume: ws.volumeOrNone()})
	ws.startedOrReleased(b)
	if err != nil {
		if ctx.Err() != nil {
			return contract.SessionInfo{}, ptr(contract.Cancelled())
		}
		if errors.Is(err, ErrWorkspaceBusy) {
			return contract.SessionInfo{}, ptr(contract.WorkspaceBusy(req.Workspace))
		}
		return contract.SessionInfo{}, engineFail(contract.Job{}, err).Error
	}
	ls.box = b
	// The session is answered only once its box answers on the channel.
	if ls.ch, err = r.connectSession(ctx, ls); err != nil {
		r.log.Warn("session box did not answer", "box", b.ID(), "err", err)
		ls.box.Kill()
		r.removeSessionBox(ls.box)
		if ctx.Err() != nil {
			return contract.SessionInfo{}, ptr(contract.Cancelled())
		}
		return contract.SessionInfo{}, engineFail(contract.Job{}, err).Error
	}
	ls.turn <- struct{}{}
	s.mu.Lock()
	s.live[ls.key] = ls
	s.opened++
	s.mu.Unlock()
	s.startJanitor()
	return s.info(ls), nil
}

func (s *sessions) info(ls *liveSession) contract.SessionInfo {
	exp := ls.lastUsed.Add(ls.idle)
	if ls.ends.Before(exp) {
		exp = ls.ends
	}
	return contract.SessionInfo{ID: ls.id, Language: ls.lang.Name, Calls: ls.calls, OpenedAt: ls.opened, LastUsed: ls.lastUsed,
		IdleTTL: ls.idle.Seconds(), ExpiresAt: exp, EndsAt: ls.ends,
		Limits: contract.SessionLimits{Memory: int64(ls.limits.Memory), Pids: ls.limits.Pids, WorkspaceBytes: int64(ls.limits.WorkspaceBytes), CPUs: ls.limits.CPUs},
		Roots:  ls.roots, Running: ls.running, Workspace: ls.workspace}
}

// ListSessions lists client's open sessions, oldest first.
func (r *BoxRunner) ListSessions(client string) []contract.SessionInfo {
	s := r.sessionsOf()
	s.mu.Lock()
	defer s.mu.Unlock()
	out := []contract.SessionInfo{}
	for _, ls := range s.live {
		if ls.client == client {
			out = append(out, s.info(ls))
		}
	}
	sort.Slice(out, func(i, j int) bool { return out[i].OpenedAt.Before(out[j].OpenedAt) })
	return out
}

// CloseSession ends client's session id; an id that is not client's
// open session is session_not_found, and nothing changes.
func (r *BoxRunner) CloseSession(ctx context.Context, id, client string) *contract.ErrorInfo {
	s := r.sessionsOf()
	ls, gone := s.find(ctx, id, client)
	if ls == nil {
		if gone != "" {
			s.forget(sessionKey(id))
			return nil
		}
		return ptr(contract.NoSession())
	}
	s.end(ls, "", false)
	return nil
}

// find returns client's live session id, attaching again to its box when
// this server does not know it (a restart); or why it is gone.
func (s *sessions) find(ctx context.Context, id, client string) (*liveSession, string) {
	key := sessionKey(id)
	s.mu.Lock()
	ls := s.live[key]
	t, isGone := s.gone[key]
	s.mu.Unlock()
	if ls != nil {
		if ls.client != client {
			return nil, ""
		}
		return ls, ""
	}
	if isGone {
		if t.client != client {
			return nil, ""
		}
		return nil, t.why
	}
	return s.adopt(ctx, id, client), ""
}

// adopt finds a session box by its labels and takes it over: its owner is
// gone (or is another replica) and the session lives in the box.
func (s *sessions) adopt(ctx context.Context, id, client string) *liveSession {
	if !s.r.m.Sessions.Enabled {
		return nil
	}
	key := sessionKey(id)
	found, err := s.r.d.FindBoxes(ctx, map[string]string{LabelSession: key, LabelSessionClient: clientKey(client)})
	if err != nil || len(found) != 1 {
		return nil
	}
	exp, err := strconv.ParseInt(found[0].Labels[LabelSessionExpires], 10, 64)
	if err != nil || time.Now().Unix() > exp {
		return nil
	}
	lang, ok := s.r.m.Language(found[0].Labels[LabelLanguage])
	if !ok {
		return nil
	}
	b, err := s.r.d.Attach(ctx, found[0].ID)
	if err != nil {
		return nil
	}
	s.r.workspacesOf().adopted(b.ID(), found[0].Labels, client)
	now := time.Now()
	ls := &liveSession{key: key, id: id, client: client, lang: lang, limits: s.r.m.SessionLimits(),
		idle: min(s.r.m.Sessions.IdleTTL(), time.Unix(exp, 0).Sub(now)), opened: now, ends: time.Unix(exp, 0),
		lastUsed: now, turn: make(chan struct{}, 1), box: b, workspace: found[0].Labels[LabelWorkspace],
		// Its cells ran under another server: a replay could not rebuild it.
		cellBytes: maxCellBytes + 1}
	ls.turn <- struct{}{}
	s.mu.Lock()
	if other := s.live[key]; other != nil {
		s.mu.Unlock()
		return other
	}
	s.live[key] = ls
	s.mu.Unlock()
	s.r.alive.Add(1)
	s.startJanitor()
	s.r.log.Info("session adopted from its box", "box", b.ID())
	return ls
}

// end closes a session: its box is removed and its id remembered as gone
// (lost says why its state went) until it would have expired.
func (s *sessions) end(ls *liveSession, lost string, isLost bool) {
	s.mu.Lock()
	b := s.unlink(ls, lost, isLost)
	s.mu.Unlock()
	s.drop(b)
}

// unlink takes ls out of the live sessions and returns its box (nil when
// it was not live); under s.mu.
func (s *sessions) unlink(ls *liveSession, lost string, isLost bool) Box {
	if s.live[ls.key] != ls {
		return nil
	}
	delete(s.live, ls.key)
	ls.ended()
	if isLost {
		s.lost++
		s.gone[ls.key] = tomb{why: lost, client: ls.client, until: ls.ends}
	} else {
		// Closed or expired: its box is being removed, and a call that
		// comes meanwhile must not find it by its labels and adopt it.
		s.gone[ls.key] = tomb{client: ls.client, until: time.Now().Add(closedTomb)}
	}
	return ls.box
}

// drop kills and removes an ended session's box. The channel belongs to
// whoever holds the turn; closing the box ends it.
func (s *sessions) drop(b Box) {
	if b != nil {
		b.Kill()
		s.r.removeSessionBox(b)
	}
}

// setBox replaces the box a session is reached through (a new attach).
func (s *sessions) setBox(ls *liveSession, b Box) {
	s.mu.Lock()
	ls.box = b
	s.mu.Unlock()
}

// setLiveBox sets session ls's box b unless ls has ended, and says which,
// with the box b replaces: whoever ends ls after it removes b with it.
func (s *sessions) setLiveBox(ls *liveSession, b Box) (old Box, live bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.live[ls.key] != ls {
		return nil, false
	}
	old, ls.box = ls.box, b
	return old, true
}

func (s *sessions) forget(key string) {
	s.mu.Lock()
	delete(s.gone, key)
	s.mu.Unlock()
}

// startJanitor starts the janitor once; its tick is read here, in the
// caller, not in the new goroutine.
func (s *sessions) startJanitor() {
	s.once.Do(func() {
		tick := sessionTick
		go s.janitor(tick)
	})
}

// janitor ends idle and expired sessions and forgets old tombs.
func (s *sessions) janitor(tick time.Duration) {
	t := time.NewTicker(tick)
	defer t.Stop()
	for {
		select {
		case <-s.stop:
			return
		case <-t.C:
		}
		now := time.Now()
		var ended []Box
		// An idle session is taken out where it is found idle, under the
		// lock a call takes it under: a call that began since is never
		// ended under it.
		s.mu.Lock()
		for _, ls := range s.live {
			if !ls.busy && (now.After(ls.lastUsed.Add(ls.idle)) || now.After(ls.ends)) {
				s.r.log.Info("session expired", "idle", ls.idle)
				ended = append(ended, s.unlink(ls, "", false))
			}
		}
		for k, t := range s.gone {
			if now.After(t.until) {
				delete(s.gone, k)
			}
		}
		s.mu.Unlock()
		for _, b := range ended {
			s.drop(b)
		}
	}
}

// closedTomb is how long a session closed here is known as gone: longer
// than its box's removal takes.
const closedTomb = time.Minute

// sessionTick is how often expiry is checked.
var sessionTick = time.Second

// closeAll ends every session: a server that shuts down cleanly takes its
// sessions with it (one killed is another matter: its sessions wait in
// their boxes for a restarted server).
func (s *sessions) closeAll() {
	close(s.stop)
	s.mu.Lock()
	all := make([]*liveSession, 0, len(s.live))
	for _, ls := range s.live {
		all = append(all, ls)
	}
	s.mu.Unlock()
	for _, ls := range all {
		s.end(ls, "", false)
	}
}

// SessionRunner is a Runner that keeps sessions.
type SessionRunner interface {
	OpenSession(ctx context.Context, req SessionRequest) (contract.SessionInfo, *contract.ErrorInfo)
	RunInSession(ctx context.Context, id, client string, req RunRequest) contract.Result
	CloseSession(ctx context.Context, id, client string) *contract.ErrorInfo
	ListSessions(client string) []contract.SessionInfo
}

var _ SessionRunner = (*BoxRunner)(nil)

// Sessions is the runner itself: a BoxRunner keeps sessions (when the
// manifest enables them).
func (r *BoxRunner) Sessions() SessionRunner { return r }
