package expose

import (
	"context"
	"crypto/rand"
	"encoding/base64"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/url"
	"sort"
	"strconv"
	"sync"
	"time"

	"github.com/runbox-mcp/runbox/audit"
	"github.com/runbox-mcp/runbox/manifest"
)

// Dialer reaches sessions' boxes (sandbox.BoxRunner is one).
type Dialer interface {
	DialSession(ctx context.Context, id, client string, port int) (net.Conn, error)
	SessionDone(ctx context.Context, id, client string) (<-chan struct{}, bool)
}

// Info is what an exposure answers with.
type Info struct {
	ID        string `json:"id" jsonschema:"description=The exposure's id: session_unexpose closes it."`
	Name      string `json:"name,omitempty"`
	SessionID string `json:"session_id"`
	// BoxPort is the port inside the box.
	BoxPort int `json:"box_port"`
	// URL is what the person opens; it carries the token.
	URL string `json:"url" jsonschema_description:"Open it in a browser: it carries the exposure's token, so share it only with whoever may use the app."`
	// Address is the host's listener.
	Address     string    `json:"address"`
	Connections int       `json:"connections" jsonschema:"description=Connections open now."`
	Served      int64     `json:"served" jsonschema:"description=Connections served so far."`
	OpenedAt    time.Time `json:"opened_at"`
}

// Errors the tools turn into their answers.
var (
	// ErrOff: the manifest does not enable exposures.
	ErrOff = errors.New("exposures are off on this server (manifest sessions.expose.enabled)")
	// ErrNotFound: no exposure of the caller's by that id.
	ErrNotFound = errors.New("no such exposure of yours")
	// ErrNoSession: the session is not the caller's open session.
	ErrNoSession = errors.New("no such open session of yours")
)

// Set is the server's exposures.
type Set struct {
	cfg    manifest.Expose
	d      Dialer
	log    *slog.Logger
	record func(audit.Entry)

	mu  sync.Mutex
	all map[string]*exposure
}

// New is an empty set; record, when set, gets one audit line per
// connection.
func New(cfg manifest.Expose, d Dialer, log *slog.Logger, record func(audit.Entry)) *Set {
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	return &Set{cfg: cfg, d: d, log: log, record: record, all: map[string]*exposure{}}
}

// Enabled says whether the manifest enables exposures.
func (s *Set) Enabled() bool { return s != nil && s.cfg.Enabled }

// Expose opens a listener for client's session id's box port; name is
// the person's label for it.
func (s *Set) Expose(ctx context.Context, sessionID, client string, port int, name string) (Info, error) {
	if !s.Enabled() {
		return Info{}, ErrOff
	}
	if port < 1 || port > 65535 {
		return Info{}, fmt.Errorf("port %d is not a TCP port (1 to 65535)", port)
	}
	if len(name) > 64 {
		return Info{}, errors.New("name is longer than 64 bytes")
	}
	done, ok := s.d.SessionDone(ctx, sessionID, client)
	if !ok {
		return Info{}, ErrNoSession
	}
	s.mu.Lock()
	n := 0
	for _, e := range s.all {
		if e.session == sessionID && e.client == client {
			n++
		}
	}
	s.mu.Unlock()
	if n >= s.cfg.MaxPerSession {
		return Info{}, fmt.Errorf("this session has %d exposures open, the most it may (manifest sessions.expose.max_per_session): close one with session_unexpose", n)
	}
	ln, err := s.listen()
	if err != nil {
		return Info{}, err
	}
	lport := ln.Addr().(*net.TCPAddr).Port
	e := &exposure{set: s, client: client, session: sessionID, ln: ln, token: randomText(32),
		host:   net.JoinHostPort(s.cfg.URLHost(), strconv.Itoa(lport)),
		cookie: cookiePrefix + strconv.Itoa(lport),
		slots:  make(chan struct{}, s.cfg.MaxConnections),
		conns:  map[net.Conn]struct{}{}, boxes: map[net.Conn]struct{}{}, closed: make(chan struct{})}
	e.info = Info{ID: "x_" + randomText(12), Name: name, SessionID: sessionID, BoxPort: port, Address: ln.Addr().String(),
		OpenedAt: time.Now().UTC()}
	e.info.URL = (&url.URL{Scheme: "http", Host: e.host, Path: "/", RawQuery: tokenParam + "=" + e.token}).String()
	s.mu.Lock()
	// Counted again under the lock: two calls at once cannot pass the cap.
	n = 0
	for _, o := range s.all {
		if o.session == sessionID && o.client == client {
			n++
		}
	}
	if n >= s.cfg.MaxPerSession {
		s.mu.Unlock()
		_ = ln.Close()
		return Info{}, fmt.Errorf("this session has %d exposures open, the most it may (manifest sessions.expose.max_per_session)", n)
	}
	s.all[e.info.ID] = e
	s.mu.Unlock()
	e.wg.Add(1)
	go e.accept()
	// Not in e.wg: it is what may stop e.
	go func() {
		select {
		case <-done:
			s.remove(e, "its session ended")
		case <-e.closed:
		}
	}()
	s.log.Info("exposure opened", "exposure", e.info.ID, "box_port", port, "address", e.info.Address)
	return e.snapshot(), nil
}

// listen binds the manifest's address: a port of its list, or a free one.
func (s *Set) listen() (net.Listener, error) {
	if len(s.cfg.Ports) == 0 {
		ln, err := net.Listen("tcp", net.JoinHostPort(s.cfg.Listen, "0"))
		if err != nil {
			return nil, fmt.Errorf("listening on %s: %w", s.cfg.Listen, err)
		}
		return ln, nil
	}
	for _, p := range s.cfg.Ports {
		if ln, err := net.Listen("tcp", net.JoinHostPort(s.cfg.Listen, strconv.Itoa(p))); err == nil {
			return ln, nil
		}
	}
	return nil, fmt.Errorf("none of the manifest's ports %v is free on %s (sessions.expose.ports)", s.cfg.Ports, s.cfg.Listen)
}

// List is client's exposures, of one session when sessionID is set,
// oldest first.
func (s *Set) List(client, sessionID string) []Info {
	out := []Info{}
	if s == nil {
		return out
	}
	s.mu.Lock()
	for _, e := range s.all {
		if e.client == client && (sessionID == "" || e.session == sessionID) {
			out = append(out, e.snapshot())
		}
	}
	s.mu.Unlock()
	sort.Slice(out, func(i, j int) bool { return out[i].OpenedAt.Before(out[j].OpenedAt) })
	return out
}

// URLs are the URLs of client's exposures of session id, for the
// session's answers.
func (s *Set) URLs(client, sessionID string) []Info {
	if !s.Enabled() {
		return nil
	}
	return s.List(client, sessionID)
}

// Close ends client's exposure id: its listener and its connections.
func (s *Set) Close(client, id string) error {
	s.mu.Lock()
	e := s.all[id]
	s.mu.Unlock()
	if e == nil || e.client != client {
		return ErrNotFound
	}
	s.remove(e, "closed")
	return nil
}

// CloseAll ends every exposure (a server shutting down).
func (s *Set) CloseAll() {
	if s == nil {
		return
	}
	s.mu.Lock()
	all := make([]*exposure, 0, len(s.all))
	for _, e := range s.all {
		all = append(all, e)
	}
	s.mu.Unlock()
	for _, e := range all {
		s.remove(e, "the server shut down")
	}
}

// Open counts the exposures open now and their connections.
func (s *Set) Open() (exposures, connections int) {
	exposures, connections, _ = s.ExposureCounts()
	return exposures, connections
}

// ExposureCounts counts what is open now: exposures, the person's
// connections to them, and their streams into boxes.
func (s *Set) ExposureCounts() (exposures, connections, streams int) {
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, e := range s.all {
		exposures++
		e.mu.Lock()
		connections += len(e.conns)
		streams += len(e.boxes)
		e.mu.Unlock()
	}
	return exposures, connections, streams
}

// remove takes e out and ends it.
func (s *Set) remove(e *exposure, why string) {
	s.mu.Lock()
	if s.all[e.info.ID] == e {
		delete(s.all, e.info.ID)
	}
	s.mu.Unlock()
	if e.stop() {
		s.log.Info("exposure closed", "exposure", e.info.ID, "why", why)
	}
}

func randomText(n int) string {
	b := make([]byte, n)
	_, _ = rand.Read(b)
	return base64.RawURLEncoding.EncodeToString(b)
}
