package sandbox

import (
	"context"
	"sync"
	"time"

	"github.com/runbox-mcp/runbox/manifest"
)

// LabelPooled marks a box started ahead of a job.
const LabelPooled = "io.runbox.pooled"

// refillBackoff keeps a failing engine from being asked again at once.
const refillBackoff = 5 * time.Second

// pools keep, per language, boxes started and waiting in runbox-init for
// their one job. A box is taken by one call and removed after it; the
// pool starts another in the background.
type pools struct {
	d    *Docker
	sem  chan struct{} // bounds concurrent starts
	mu   sync.Mutex
	lang map[string]*langPool
	// closed stops refills; boxes started after it are removed.
	closed bool
	wg     sync.WaitGroup
}

type langPool struct {
	lang     manifest.Language
	ready    []*box // oldest first
	starting int
	failedAt time.Time
}

func newPools(d *Docker) *pools {
	p := &pools{d: d, sem: make(chan struct{}, max(1, d.m.Pool.RefillConcurrency)), lang: map[string]*langPool{}}
	if d.m.Pool.Size > 0 {
		for _, l := range d.m.Languages {
			p.lang[l.Name] = &langPool{lang: l}
		}
	}
	return p
}

// take returns a live waiting box, or nil.
func (p *pools) take(name string) *box {
	p.mu.Lock()
	defer p.mu.Unlock()
	lp := p.lang[name]
	if lp == nil {
		return nil
	}
	for len(lp.ready) > 0 {
		b := lp.ready[0]
		lp.ready = lp.ready[1:]
		if !b.exited() && time.Since(b.started) < p.d.m.Pool.Idle() {
			return b
		}
		p.discard(b)
	}
	return nil
}

// refill starts boxes until the language's pool is full again.
func (p *pools) refill(name string) {
	p.mu.Lock()
	defer p.mu.Unlock()
	lp := p.lang[name]
	if lp == nil || p.closed || time.Since(lp.failedAt) < refillBackoff {
		return
	}
	if !p.d.busy() {
		// The load has passed: lean boxes make way for preloaded ones.
		keep := lp.ready[:0]
		for _, b := range lp.ready {
			if b.lean {
				p.discard(b)
				continue
			}
			keep = append(keep, b)
		}
		lp.ready = keep
	}
	for len(lp.ready)+lp.starting < p.d.m.Pool.Size {
		lp.starting++
		p.wg.Add(1)
		go p.startOne(lp)
	}
}

func (p *pools) refillAll() {
	for name := range p.lang {
		p.refill(name)
	}
}

func (p *pools) startOne(lp *langPool) {
	defer p.wg.Done()
	p.sem <- struct{}{}
	defer func() { <-p.sem }()
	labels := p.d.owner.Labels(map[string]string{LabelLanguage: lp.lang.Name, LabelPooled: "true"})
	args := prestartArgs(p.d.m, lp.lang)
	// While calls wait for a slot, a preload (pandas: ~0.7 CPU-seconds)
	// would take CPU from the runs in progress for a box the next call
	// takes at once, maybe without importing anything: start it lean.
	lean := args != nil && p.d.busy()
	if lean {
		args = nil
	}
	b, err := p.d.startBox(context.Background(), lp.lang, labels, args)
	p.mu.Lock()
	defer p.mu.Unlock()
	lp.starting--
	switch {
	case err != nil:
		lp.failedAt = time.Now()
		p.d.log.Warn("could not start a pooled box", "language", lp.lang.Name, "err", err)
	case p.closed:
		p.discard(b)
	default:
		b.lean = lean
		lp.ready = append(lp.ready, b)
	}
}

// expire replaces boxes that waited too long or died while waiting.
func (p *pools) expire() {
	p.mu.Lock()
	for _, lp := range p.lang {
		keep := lp.ready[:0]
		for _, b := range lp.ready {
			if b.exited() || time.Since(b.started) >= p.d.m.Pool.Idle() {
				p.discard(b)
				continue
			}
			keep = append(keep, b)
		}
		lp.ready = keep
	}
	p.mu.Unlock()
	p.refillAll()
}

// discard removes a box in the background; called with p.mu held.
func (p *pools) discard(b *box) {
	p.wg.Add(1)
	go func() {
		defer p.wg.Done()
		b.close()
		p.d.remove(b.id)
	}()
}

// drain removes every waiting box and stops refills.
func (p *pools) drain() {
	p.mu.Lock()
	p.closed = true
	for _, lp := range p.lang {
		for _, b := range lp.ready {
			p.discard(b)
		}
		lp.ready = nil
	}
	p.mu.Unlock()
	p.wg.Wait()
}

// idle reports how many boxes wait, per language.
func (p *pools) idle() map[string]int {
	p.mu.Lock()
	defer p.mu.Unlock()
	out := map[string]int{}
	for name, lp := range p.lang {
		out[name] = len(lp.ready)
	}
	return out
}
