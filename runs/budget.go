package runs

import (
	"sync"
	"time"

	"github.com/runbox-mcp/runbox/contract"

	"github.com/runbox-mcp/runbox/manifest"
)

// Budgets bound what each client session may spend: total run seconds and
// runs per minute, so a looping agent stops burning compute.
type Budgets struct {
	mu       sync.Mutex
	limits   manifest.Budgets
	now      func() time.Time
	sessions map[string]*usage
}

type usage struct {
	runSeconds float64
	starts     []time.Time // in the last minute
	last       time.Time
}

// idleSession is when a silent session's usage is forgotten.
const idleSession = time.Hour

// NewBudgets returns budgets with the manifest's limits.
func NewBudgets(limits manifest.Budgets) *Budgets {
	return &Budgets{limits: limits, now: time.Now, sessions: map[string]*usage{}}
}

// Admit records a run's start, or refuses it when the session has spent a
// budget.
func (b *Budgets) Admit(session string) *contract.ErrorInfo {
	if b.limits.RunSeconds <= 0 && b.limits.RunsPerMinute <= 0 {
		return nil
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	now := b.now()
	if len(b.sessions) > 1000 {
		for id, u := range b.sessions {
			if now.Sub(u.last) > idleSession {
				delete(b.sessions, id)
			}
		}
	}
	u := b.sessions[session]
	if u == nil {
		u = &usage{}
		b.sessions[session] = u
	}
	u.last = now
	recent := u.starts[:0]
	for _, t := range u.starts {
		if now.Sub(t) < time.Minute {
			recent = append(recent, t)
		}
	}
	u.starts = recent
	if lim := b.limits.RunSeconds; lim > 0 && u.runSeconds >= lim {
		info := contract.BudgetRunTime(lim)
		return &info
	}
	if lim := b.limits.RunsPerMinute; lim > 0 && len(u.starts) >= lim {
		info := contract.BudgetRate(lim, time.Minute-now.Sub(u.starts[0]))
		return &info
	}
	u.starts = append(u.starts, now)
	return nil
}

// Charge adds a finished run's wall time to its session.
func (b *Budgets) Charge(session string, wall time.Duration) {
	b.mu.Lock()
	defer b.mu.Unlock()
	if u := b.sessions[session]; u != nil {
		u.runSeconds += wall.Seconds()
	}
}
