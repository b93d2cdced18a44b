package mcpserver

import (
	"log/slog"
	"net/http"
	"sync"
	"time"
)

// Reasons the HTTP listener refuses a connection or a request, as
// /metrics counts them (runbox_http_refused_total).
const (
	refusedUnauthorized    = "unauthorized"
	refusedBodyTooLarge    = "body_too_large"
	refusedBodyUnread      = "body_unread"
	refusedPerAddress      = "connections_per_address"
	refusedUnauthenticated = "unauthenticated_connections"
)

const (
	// refusalWriteTime bounds the writing of a refusal to a client that
	// does not read it.
	refusalWriteTime = 10 * time.Second
	// refusalLogEvery is the most often one reason is logged.
	refusalLogEvery = time.Second
)

// refusals counts every refusal of the HTTP listener and logs it once: at
// most one line a second per reason, which says how many refusals since
// the last line went unlogged, so that a flood cannot fill the log.
type refusals struct {
	count  func(reason string)
	logger *slog.Logger

	mu       sync.Mutex
	logged   map[string]time.Time
	unlogged map[string]int
}

func newRefusals(count func(string), logger *slog.Logger) *refusals {
	if logger == nil {
		logger = slog.New(slog.DiscardHandler)
	}
	return &refusals{count: count, logger: logger, logged: map[string]time.Time{}, unlogged: map[string]int{}}
}

// note counts and logs one refusal of a client at remote.
func (f *refusals) note(reason, remote string, attrs ...any) {
	if f.count != nil {
		f.count(reason)
	}
	f.mu.Lock()
	now := time.Now()
	if now.Sub(f.logged[reason]) < refusalLogEvery {
		f.unlogged[reason]++
		f.mu.Unlock()
		return
	}
	n := f.unlogged[reason]
	f.logged[reason], f.unlogged[reason] = now, 0
	f.mu.Unlock()
	f.logger.Warn("http: refused", append([]any{"reason", reason, "remote", remote, "unlogged_before", n}, attrs...)...)
}

// refuse answers a request with status and closes its connection after
// the answer, without reading what is left of the body: a client that
// announced a body and drips it gets its answer at once, and a client that
// does not read the answer holds the connection at most refusalWriteTime.
// (net/http reads up to 256 KiB of a body left unread, before answering
// unless the answer closes the connection, and after it in any case: the
// read deadline ends that read at once.)
func (f *refusals) refuse(w http.ResponseWriter, r *http.Request, status int, reason, msg string) {
	f.note(reason, r.RemoteAddr, "path", r.URL.Path)
	rc := http.NewResponseController(w)
	_ = rc.SetReadDeadline(time.Now())
	_ = rc.SetWriteDeadline(time.Now().Add(refusalWriteTime))
	w.Header().Set("Connection", "close")
	http.Error(w, msg, status)
}
