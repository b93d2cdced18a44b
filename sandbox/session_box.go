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
	"strconv"
	"strings"
	"time"

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

// FoundBox is a running box found by its labels ([Driver].FindBoxes).
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

// sessionArgs are runbox-init's arguments for a session box of lang (with
// a named workspace at /workspace, whose user installs land there; direct:
// listening for direct channels).
func sessionArgs(m *manifest.Manifest, lang manifest.Language, isolation string, ca []byte, workspace, direct bool) []string {
	job := initJob(m, contract.Job{Language: lang}, isolation)
	if workspace {
		job.Env = workspaceEnv(job.Env)
	}
	spec := initproto.Session{Driver: lang.ErrorFormat, Interpreter: job.Argv[0], Env: job.Env, Dir: job.Dir,
		CodePath: job.CodePath, CPUSeconds: job.CPUSeconds, NProc: job.NProc, CA: ca,
		Restorable: isolation == manifest.IsolationGVisor, Direct: direct}
	return []string{initproto.SessionFlag, initproto.EncodeSession(spec)}
}

func clientKey(client string) string {
	s := sha256.Sum256([]byte("runbox-client:" + client))
	return hex.EncodeToString(s[:16])
}

// connectSession opens the session box's channel (openAgain). A box that
// does not answer in APITimeout gets one more try on a new attach, waiting
// longer: on a busy node (a Kubernetes node starting dozens of pods on two
// cores) the box's process, or the attach stream to it, may come up late,
// and an attach that never came up stays down however long one waits.
func (r *BoxRunner) connectSession(ctx context.Context, ls *liveSession) (*channel, error) {
	ch, err := r.connectSessionOnce(ctx, ls, sessionAnswerWait)
	if !errors.Is(err, errNoAnswer) || ctx.Err() != nil {
		return ch, err
	}
	r.log.Info("session box did not answer yet: attaching again", "box", ls.box.ID(), "err", err)
	// The failed attach is closed: the next Exchange attaches anew.
	if _, spent := ls.box.(spentExchange); !spent {
		r.sessionsOf().setBox(ls, spentExchange{ls.box})
	}
	return r.connectSessionOnce(ctx, ls, 3*sessionAnswerWait)
}

// sessionAnswerWait is how long a session box's first answer on a new
// attach is awaited before attaching again.
var sessionAnswerWait = APITimeout

// connectSessionOnce opens the session box's channel, waiting at most wait
// for the box's answer.
func (r *BoxRunner) connectSessionOnce(ctx context.Context, ls *liveSession, wait time.Duration) (*channel, error) {
	b := ls.box
	conn, err := b.Exchange(ctx)
	if err != nil {
		// The box's first channel is gone (a previous call's, broken):
		// attach again.
		if b, err = r.d.Attach(ctx, b.ID()); err != nil {
			return nil, err
		}
		if conn, err = b.Exchange(ctx); err != nil {
			return nil, err
		}
		r.sessionsOf().setBox(ls, b)
	}
	ch, _, err := openAgain(ctx, conn, maxStream(ls.limits), wait)
	if err != nil {
		return nil, err
	}
	// A session box's channel may be reopened: the first Exchange is
	// spent, the next one attaches again.
	r.sessionsOf().setBox(ls, spentExchange{b})
	ls.live.Store(ch)
	return ch, nil
}

// errNoAnswer is a box that did not answer a channel's reset in time.
var errNoAnswer = errors.New("the box did not answer")

// openAgain opens a channel over conn to a box that may have served
// another before: a reset that ends whatever a previous server left
// half-written, the box's answer (awaited at most wait), and a new
// multiplexer session over it.
func openAgain(ctx context.Context, conn Conn, max int64, wait time.Duration) (*channel, *initproto.ResetWriter, error) {
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
	case <-time.After(wait):
		a.err = errNoAnswer
	case <-ctx.Done():
		a.err = ctx.Err()
	}
	if a.err != nil {
		_ = conn.Close()
		if first, _, _ := strings.Cut(strings.TrimSpace(conn.Diag()), "\n"); first != "" {
			return nil, nil, fmt.Errorf("%w: %s", a.err, first)
		}
		return nil, nil, a.err
	}
	ch, err := newChannel(conn, sessionConn{Reader: a.r, w: w, c: conn}, max)
	if err != nil {
		_ = conn.Close()
		return nil, nil, err
	}
	return ch, w, nil
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
