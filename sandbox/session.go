package sandbox

import (
	"context"
	"crypto/rand"
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"sort"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/hashicorp/yamux"

	"github.com/runbox-mcp/runbox/contract"
	"github.com/runbox-mcp/runbox/internal/initproto"
	"github.com/runbox-mcp/runbox/manifest"
)

// Labels of a session box: the box, not the server's memory, holds the
// session, so a restarted server (or another replica) finds it by them.
const (
	// LabelSession is the sha256 of the session id: the id itself, a
	// capability, is never written where the platform shows it.
	LabelSession = "io.runbox.session"
	// LabelSessionClient is the sha256 of the client that opened it.
	LabelSessionClient = "io.runbox.session.client"
	// LabelSessionExpires is the end of its maximum lifetime (unix
	// seconds): the reaper removes the box after it, whoever owns it.
	LabelSessionExpires = "io.runbox.session.expires"
)

// SessionDriver is a Driver whose running boxes can be found by their
// labels and attached to again: what sessions need to outlive a server.
type SessionDriver interface {
	// FindBoxes lists the running boxes that carry all of labels.
	FindBoxes(ctx context.Context, labels map[string]string) ([]FoundBox, error)
	// Attach opens a running box again (a new channel to its runbox-init).
	Attach(ctx context.Context, id string) (Box, error)
}

// FoundBox is a running box found by its labels.
type FoundBox struct {
	ID     string
	Labels map[string]string
}

// SessionBoxExpired says whether labels are a session box's and, if so,
// whether its maximum lifetime is over: the reapers' rule for session
// boxes, which outlive their owner process.
func SessionBoxExpired(labels map[string]string, now time.Time) (isSession, expired bool) {
	if labels[LabelSession] == "" {
		return false, false
	}
	exp, err := strconv.ParseInt(labels[LabelSessionExpires], 10, 64)
	return true, err != nil || now.Unix() > exp
}

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
}

// SessionInfo describes an open session.
type SessionInfo struct {
	ID        string          `json:"session_id"`
	Language  string          `json:"language"`
	Calls     int             `json:"calls"`
	OpenedAt  time.Time       `json:"opened_at"`
	LastUsed  time.Time       `json:"last_used_at"`
	IdleTTL   float64         `json:"idle_ttl_seconds"`
	ExpiresAt time.Time       `json:"expires_at"`
	EndsAt    time.Time       `json:"max_lifetime_ends_at"`
	Limits    SessionLimitsOf `json:"limits"`
	// Roots are the client's roots mounted in the session's box when it
	// opened; a restarted server does not know them.
	Roots []contract.Root `json:"roots,omitempty"`
}

// SessionLimitsOf are the limits a session runs under.
type SessionLimitsOf struct {
	Memory         int64   `json:"memory_bytes"`
	Pids           int64   `json:"pids"`
	WorkspaceBytes int64   `json:"workspace_bytes"`
	CPUs           float64 `json:"cpus"`
}

// SessionStats count sessions, for metrics.
type SessionStats struct {
	Open   int
	Opened int64
	Lost   int64
	Calls  int64
}

// SessionKey is how an id is held, labelled and logged: its sha256.
func SessionKey(id string) string { return sessionKey(id) }

// sessionKey is how an id is held and labelled: the first 192 bits of
// its sha256, in hex (a Kubernetes label value holds at most 63 bytes).
func sessionKey(id string) string {
	s := sha256.Sum256([]byte(id))
	return hex.EncodeToString(s[:24])
}

// newSessionID is 192 random bits: a capability nobody guesses.
func newSessionID() string {
	b := make([]byte, 24)
	_, _ = rand.Read(b)
	return "s_" + base64.RawURLEncoding.EncodeToString(b)
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

	// turn lets one call at a time use the session.
	turn chan struct{}

	// Under sessions.mu:
	box      Box
	lastUsed time.Time
	calls    int
	busy     bool

	// Under turn:
	ch *sessionChannel
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
func (r *BoxRunner) OpenSession(ctx context.Context, req SessionRequest) (SessionInfo, *contract.ErrorInfo) {
	s := r.sessionsOf()
	m := r.m.Sessions
	if !m.Enabled {
		return SessionInfo{}, ptr(contract.Invalid("sessions are off on this server (manifest sessions.enabled)"))
	}
	if _, ok := r.d.(SessionDriver); !ok {
		return SessionInfo{}, ptr(contract.Invalid("sessions are not available on the %s backend yet", r.m.Backend))
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
		return SessionInfo{}, ptr(contract.SessionsFull(full, limit))
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
		return SessionInfo{}, engineFail(contract.Job{}, err).Error
	}
	if _, err := r.d.ImageDigest(ctx, req.Language.Image); err != nil {
		return SessionInfo{}, engineFail(contract.Job{}, err).Error
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
		idle: idle, opened: now, ends: now.Add(life), lastUsed: now, turn: make(chan struct{}, 1), roots: Roots(req.Mounts)}
	lim := req.Limits
	b, err := r.start(ctx, BoxSpec{Language: req.Language, Lifetime: life + backstopGrace, Session: true, Limits: &lim, Mounts: req.Mounts,
		InitArgs: sessionArgs(r.m, req.Language, r.d.Isolation(), r.caPEM()),
		Labels: r.owner.Labels(map[string]string{LabelLanguage: req.Language.Name, LabelSession: ls.key,
			LabelSessionClient: clientKey(req.Client), LabelSessionExpires: strconv.FormatInt(ls.ends.Unix(), 10)})})
	if err != nil {
		if ctx.Err() != nil {
			return SessionInfo{}, ptr(contract.Cancelled())
		}
		return SessionInfo{}, engineFail(contract.Job{}, err).Error
	}
	ls.box = b
	// The session is answered only once its box answers on the channel.
	if ls.ch, err = r.connectSession(ctx, ls); err != nil {
		r.log.Warn("session box did not answer", "box", b.ID(), "err", err)
		ls.box.Kill()
		r.remove(ls.box)
		if ctx.Err() != nil {
			return SessionInfo{}, ptr(contract.Cancelled())
		}
		return SessionInfo{}, engineFail(contract.Job{}, err).Error
	}
	ls.turn <- struct{}{}
	s.mu.Lock()
	s.live[ls.key] = ls
	s.opened++
	s.mu.Unlock()
	s.startJanitor()
	return s.info(ls), nil
}

// sessionArgs are runbox-init's arguments for a session box of lang.
func sessionArgs(m *manifest.Manifest, lang manifest.Language, isolation string, ca []byte) []string {
	job := initJob(m, contract.Job{Language: lang}, isolation)
	spec := initproto.Session{Driver: lang.ErrorFormat, Interpreter: job.Argv[0], Env: job.Env, Dir: job.Dir,
		CodePath: job.CodePath, CPUSeconds: job.CPUSeconds, NProc: job.NProc, CA: ca}
	return []string{initproto.SessionFlag, initproto.EncodeSession(spec)}
}

func clientKey(client string) string {
	s := sha256.Sum256([]byte("runbox-client:" + client))
	return hex.EncodeToString(s[:16])
}

func (s *sessions) info(ls *liveSession) SessionInfo {
	exp := ls.lastUsed.Add(ls.idle)
	if ls.ends.Before(exp) {
		exp = ls.ends
	}
	return SessionInfo{ID: ls.id, Language: ls.lang.Name, Calls: ls.calls, OpenedAt: ls.opened, LastUsed: ls.lastUsed,
		IdleTTL: ls.idle.Seconds(), ExpiresAt: exp, EndsAt: ls.ends,
		Limits: SessionLimitsOf{Memory: int64(ls.limits.Memory), Pids: ls.limits.Pids, WorkspaceBytes: int64(ls.limits.WorkspaceBytes), CPUs: ls.limits.CPUs},
		Roots:  ls.roots}
}

// Sessions lists client's open sessions, oldest first.
func (r *BoxRunner) Sessions(client string) []SessionInfo {
	s := r.sessionsOf()
	s.mu.Lock()
	defer s.mu.Unlock()
	out := []SessionInfo{}
	for _, ls := range s.live {
		if ls.client == client {
			out = append(out, s.info(ls))
		}
	}
	sort.Slice(out, func(i, j int) bool { return out[i].OpenedAt.Before(out[j].OpenedAt) })
	return out
}

// AllSessions lists every open session of this server (for operators).
func (r *BoxRunner) AllSessions() []SessionInfo {
	s := r.sessionsOf()
	s.mu.Lock()
	defer s.mu.Unlock()
	out := []SessionInfo{}
	for _, ls := range s.live {
		out = append(out, s.info(ls))
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
	sd, ok := s.r.d.(SessionDriver)
	if !ok || !s.r.m.Sessions.Enabled {
		return nil
	}
	key := sessionKey(id)
	found, err := sd.FindBoxes(ctx, map[string]string{LabelSession: key, LabelSessionClient: clientKey(client)})
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
	b, err := sd.Attach(ctx, found[0].ID)
	if err != nil {
		return nil
	}
	now := time.Now()
	ls := &liveSession{key: key, id: id, client: client, lang: lang, limits: s.r.m.SessionLimits(),
		idle: min(s.r.m.Sessions.IdleTTL(), time.Unix(exp, 0).Sub(now)), opened: now, ends: time.Unix(exp, 0),
		lastUsed: now, turn: make(chan struct{}, 1), box: b}
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
	if s.live[ls.key] != ls {
		s.mu.Unlock()
		return
	}
	delete(s.live, ls.key)
	if isLost {
		s.lost++
		s.gone[ls.key] = tomb{why: lost, client: ls.client, until: ls.ends}
	}
	b := ls.box
	s.mu.Unlock()
	// The channel belongs to whoever holds the turn; closing the box ends it.
	b.Kill()
	s.r.remove(b)
}

// setBox replaces the box a session is reached through (a new attach).
func (s *sessions) setBox(ls *liveSession, b Box) {
	s.mu.Lock()
	ls.box = b
	s.mu.Unlock()
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
		var ended []*liveSession
		s.mu.Lock()
		for _, ls := range s.live {
			if !ls.busy && (now.After(ls.lastUsed.Add(ls.idle)) || now.After(ls.ends)) {
				ended = append(ended, ls)
			}
		}
		for k, t := range s.gone {
			if now.After(t.until) {
				delete(s.gone, k)
			}
		}
		s.mu.Unlock()
		for _, ls := range ended {
			s.r.log.Info("session expired", "idle", ls.idle)
			s.end(ls, "", false)
		}
	}
}

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

// RunInSession runs job in client's session id. It always returns a
// result; a session that is not client's is session_not_found.
func (r *BoxRunner) RunInSession(ctx context.Context, id, client string, req RunRequest) contract.Result {
	job := req.Job
	s := r.sessionsOf()
	ls, gone := s.find(ctx, id, client)
	if ls == nil {
		if gone != "" {
			return contract.Fail(job, contract.SessionGone(gone))
		}
		return contract.Fail(job, contract.NoSession())
	}
	if ls.lang.Name != job.Language.Name {
		return contract.Fail(job, contract.Invalid("session %s runs %s, not %s", id, ls.lang.Name, job.Language.Name))
	}
	select {
	case <-ls.turn:
	case <-ctx.Done():
		return contract.Fail(job, contract.Cancelled())
	}
	defer func() { ls.turn <- struct{}{} }()
	s.mu.Lock()
	if s.live[ls.key] != ls {
		s.mu.Unlock()
		return contract.Fail(job, contract.NoSession())
	}
	ls.busy = true
	s.mu.Unlock()
	defer func() {
		s.mu.Lock()
		ls.busy = false
		ls.lastUsed = time.Now()
		s.mu.Unlock()
	}()

	release, queueMs, refused := r.slots.take(ctx, job, r.m)
	if refused != nil {
		return *refused
	}
	r.active()
	defer r.active()
	defer release()
	// The call's tool calls and proxied connections are served as in a
	// one-off run: req's handlers, and a fresh proxy for this call.
	streams, px := r.withProxy(req)
	res, lost := r.callSession(ctx, ls, job, streams)
	if px != nil {
		withNetwork(&res, px.Records())
	}
	res.Metrics.QueueMs = queueMs
	res.Isolation = r.d.Isolation()
	res.Image, _ = r.d.ImageDigest(ctx, job.Language.Image)
	s.mu.Lock()
	s.calls++
	if res.Session != nil {
		ls.calls = res.Session.Call
	}
	s.mu.Unlock()
	if lost != "" {
		if res.Session != nil {
			res.Session.State, res.Session.LostReason = contract.SessionLost, lost
		}
		if res.Error == nil {
			res.Status, res.Error = contract.StatusError, ptr(contract.SessionGone(lost))
		} else if res.Error.Kind != contract.KindSessionLost {
			res.Error.Hint += contract.LostHint
		}
		s.end(ls, lost, true)
	}
	if res.Session != nil {
		s.mu.Lock()
		res.Session.ExpiresAt = s.info(ls).ExpiresAt
		if lost != "" {
			res.Session.ExpiresAt = time.Now()
		}
		s.mu.Unlock()
	}
	return res
}

// callSession runs one job over the session's channel, opening it (again)
// when needed; lost says why the session's state is gone.
func (r *BoxRunner) callSession(ctx context.Context, ls *liveSession, job contract.Job, streams *initproto.Streams) (res contract.Result, lost string) {
	if ls.ch != nil && ls.ch.mux.IsClosed() {
		// Broken while idle (another server attached to the box and
		// reset its channel): no job is lost, open it again.
		ls.ch.close()
		ls.ch = nil
	}
	if ls.ch == nil {
		ch, err := r.connectSession(ctx, ls)
		if err != nil {
			r.log.Warn("session box did not answer", "run_id", job.RunID, "box", ls.box.ID(), "err", err)
			if !ls.box.Alive() {
				return contract.Fail(job, contract.SessionGone("its box is gone")), "its box is gone"
			}
			return engineFail(job, err), ""
		}
		ls.ch = ch
	}
	ch := ls.ch
	// The streams the box opens from now on are this call's. Its handlers
	// end with the call, not with its cancellation: a cancelled call
	// interrupts the cell, which must meet the interrupt where it is (in
	// a tool call, say), not a tool call failed under it a moment before.
	bs := ch.begin(context.WithoutCancel(ctx), ls.limits, streams)
	defer ch.finish(bs)
	sent := time.Now()
	st, err := ch.mux.OpenStream()
	if err != nil {
		ch.close()
		ls.ch = nil
		return contract.Fail(job, contract.SandboxFailed("the session's channel broke: "+err.Error())), ""
	}
	ij := initJob(r.m, job, r.d.Isolation())
	ij.CA = r.caPEM()
	ij.Dir, ij.CodePath = manifest.Workspace, manifest.Workspace+"/"+job.Language.File
	ij.Streams, ij.StreamBudgets, ij.Call = streams.Kinds(), budgets(streams), bs.call
	go func() {
		_ = initproto.SendJob(st, ij)
		_ = st.Close()
	}()
	type answer struct {
		rep *initproto.Report
		err error
	}
	got := make(chan answer, 1)
	go func() {
		rep, err := initproto.ReceiveReport(st, maxReport(ls.limits))
		got <- answer{rep, err}
	}()
	backstop := time.NewTimer(job.Timeout + r.grace)
	defer backstop.Stop()
	cancelled := false
	var a answer
wait:
	for {
		select {
		case a = <-got:
			break wait
		case <-backstop.C:
			ls.box.Kill()
			a = <-got
			if a.rep == nil {
				o := r.judge(context.WithoutCancel(ctx), ls.box, outcome{backstop: true}, sent)
				res = buildResult(r.m, job, o)
				return r.sessionRef(res, ls, 0), "the call ran past its timeout and the session's box was killed"
			}
			break wait
		case <-ctx.Done():
			if !cancelled {
				cancelled = true
				if ist, err := ch.mux.OpenStream(); err == nil {
					_ = initproto.Send(ist, initproto.Header{Kind: initproto.StreamInterrupt})
					_ = ist.Close()
				}
				backstop.Reset(sessionInterruptWait + r.grace)
			}
			ctx = context.WithoutCancel(ctx)
		}
	}
	if why := bs.broken(); why != "" {
		return r.sessionViolation(ls, job, why)
	}
	if a.err != nil || a.rep == nil {
		r.log.Warn("session box ended without a report", "run_id", job.RunID, "box", ls.box.ID(), "err", a.err, "init_stderr", ch.conn.Diag())
		ch.close()
		ls.ch = nil
		o := r.judge(context.WithoutCancel(ctx), ls.box, outcome{lost: fmt.Sprintf("the session's box ended without a report: %v", a.err)}, sent)
		res = buildResult(r.m, job, o)
		why := "the session's box ended"
		if o.oomKilled {
			why = "the session's box ran out of memory"
		}
		return r.sessionRef(res, ls, 0), why
	}
	rep := a.rep
	var contents [][]byte
	want, violation := sentArtifacts(rep, ls.limits)
	if violation != "" {
		return r.sessionViolation(ls, job, violation)
	}
	if len(want) > 0 {
		contents, violation, err = collectArtifacts(bs.arts, ch.done, want, r.grace)
		if why := bs.broken(); why != "" {
			return r.sessionViolation(ls, job, why)
		}
		if violation != "" || err != nil {
			ch.close()
			ls.ch = nil
			rep.Artifacts, contents = nil, nil
		}
	}
	o := outcome{report: rep, contents: contents}
	if rep.OOMKills != 0 && rep.Session != nil && rep.Session.Lost != "" {
		o = r.judge(context.WithoutCancel(ctx), ls.box, o, sent)
	}
	res = buildResult(r.m, job, o)
	call := 0
	if rep.Session != nil {
		call = rep.Session.Calls
		lost = rep.Session.Lost
	}
	if cancelled && lost == "" {
		info := contract.Cancelled()
		info.Message = "the call was cancelled and the running code interrupted; the session and its state live on"
		res.Status, res.Error = contract.StatusError, &info
	}
	return r.sessionRef(res, ls, call), lost
}

// sessionViolation ends a call whose box broke the channel protocol
// (flooded it, lied, opened streams past the bounds): as a one-off box, it
// is not believed and is killed, and with it the session's state.
func (r *BoxRunner) sessionViolation(ls *liveSession, job contract.Job, why string) (contract.Result, string) {
	ls.box.Kill()
	if ls.ch != nil {
		ls.ch.close()
		ls.ch = nil
	}
	r.log.Warn("session box broke the channel protocol", "run_id", job.RunID, "box", ls.box.ID(), "why", why)
	res := contract.Fail(job, contract.SandboxFailed("the session's box broke the channel protocol ("+why+") and was killed"))
	return r.sessionRef(res, ls, 0), "the box broke the channel protocol"
}

// sessionInterruptWait is how long a cancelled call waits for the
// interrupted cell's report (runbox-init gives the cell 3 s).
const sessionInterruptWait = 5 * time.Second

func (r *BoxRunner) sessionRef(res contract.Result, ls *liveSession, call int) contract.Result {
	if call == 0 {
		call = ls.calls + 1
	}
	res.Session = &contract.SessionRef{ID: ls.id, Call: call, State: contract.SessionAlive}
	return res
}

// connectSession opens the session box's channel: a reset that ends
// whatever a previous server left half-written, the box's answer, and a
// new multiplexer session over it.
func (r *BoxRunner) connectSession(ctx context.Context, ls *liveSession) (*sessionChannel, error) {
	b := ls.box
	conn, err := b.Exchange(ctx)
	if err != nil {
		// The box's first channel is gone (a previous call's, broken):
		// attach again.
		sd, ok := r.d.(SessionDriver)
		if !ok {
			return nil, err
		}
		if b, err = sd.Attach(ctx, b.ID()); err != nil {
			return nil, err
		}
		if conn, err = b.Exchange(ctx); err != nil {
			return nil, err
		}
		r.sessionsOf().setBox(ls, b)
	}
	nonce := make([]byte, initproto.NonceSize)
	_, _ = rand.Read(nonce)
	w := initproto.NewResetWriter(conn)
	type acked struct {
		r   io.Reader
		err error
	}
	done := make(chan acked, 1)
	go func() {
		if err := w.Reset(nonce); err != nil {
			done <- acked{nil, err}
			return
		}
	}()
	go func() {
		rd, err := initproto.AwaitAck(conn, nonce, 64<<20)
		done <- acked{rd, err}
	}()
	var a acked
	select {
	case a = <-done:
	case <-time.After(APITimeout):
		a.err = errors.New("the session box did not answer")
	case <-ctx.Done():
		a.err = ctx.Err()
	}
	if a.err != nil {
		_ = conn.Close()
		if first, _, _ := strings.Cut(strings.TrimSpace(conn.Diag()), "\n"); first != "" {
			return nil, fmt.Errorf("%w: %s", a.err, first)
		}
		return nil, a.err
	}
	mux, err := yamux.Client(initproto.Coalesce(sessionConn{Reader: a.r, w: w, c: conn}), initproto.MuxConfig())
	if err != nil {
		_ = conn.Close()
		return nil, err
	}
	// A session box's channel may be reopened: the first Exchange is
	// spent, the next one attaches again.
	r.sessionsOf().setBox(ls, spentExchange{b})
	return newSessionChannel(conn, mux), nil
}

// spentExchange is a box whose Exchange was used: the next channel needs
// a new attach.
type spentExchange struct{ Box }

func (spentExchange) Exchange(context.Context) (Conn, error) {
	return nil, errors.New("the box's channel was already opened")
}

type sessionConn struct {
	io.Reader
	w *initproto.ResetWriter
	c Conn
}

func (c sessionConn) Write(p []byte) (int, error) { return c.w.Write(p) }
func (c sessionConn) Close() error                { return c.c.Close() }

// SessionRunner is a Runner that keeps sessions.
type SessionRunner interface {
	OpenSession(ctx context.Context, req SessionRequest) (SessionInfo, *contract.ErrorInfo)
	RunInSession(ctx context.Context, id, client string, req RunRequest) contract.Result
	CloseSession(ctx context.Context, id, client string) *contract.ErrorInfo
	Sessions(client string) []SessionInfo
}

var _ SessionRunner = (*BoxRunner)(nil)

// SessionsOf returns the session runner behind r (past the result cache,
// which never answers a session's call), if r keeps sessions.
func SessionsOf(r Runner) (SessionRunner, bool) {
	if c, ok := r.(*Cache); ok {
		r = c.next
	}
	sr, ok := r.(SessionRunner)
	return sr, ok
}
