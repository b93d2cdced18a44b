package sandbox

import (
	"time"

	"github.com/runbox-mcp/runbox/contract"
)

// maxLoggedCells bounds the cells a session's log keeps: the most recent.
// With contract's bounds on each cell, a session's log stays under half a
// megabyte.
const maxLoggedCells = 50

// CellLog is a SessionRunner that keeps each open session's recent cells,
// for a person's view of the session.
type CellLog interface {
	// SessionCells are client's session id's cells so far; false when id
	// is not client's open session.
	SessionCells(id, client string) (contract.SessionCells, bool)
}

var _ CellLog = (*BoxRunner)(nil)

// logCell keeps a summary of a call that ran in the session.
func (s *sessions) logCell(ls *liveSession, code string, res contract.Result) {
	if res.Session == nil {
		return
	}
	c := contract.CellOf(res.Session.Call, code, res, time.Now())
	s.mu.Lock()
	defer s.mu.Unlock()
	ls.logged++
	if len(ls.log) == maxLoggedCells {
		copy(ls.log, ls.log[1:])
		ls.log[len(ls.log)-1] = c
		return
	}
	ls.log = append(ls.log, c)
}

// SessionCells reads the log of client's open session id. A session this
// server has not seen (one in a box another server ran) has none: the log
// lives with the server, and goes when the session closes.
func (r *BoxRunner) SessionCells(id, client string) (contract.SessionCells, bool) {
	s := r.sessionsOf()
	s.mu.Lock()
	defer s.mu.Unlock()
	ls := s.live[sessionKey(id)]
	if ls == nil || ls.client != client {
		return contract.SessionCells{}, false
	}
	return contract.SessionCells{SessionID: id, Cells: append([]contract.SessionCell{}, ls.log...), Omitted: ls.logged - len(ls.log)}, true
}
