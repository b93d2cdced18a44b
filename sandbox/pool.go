package sandbox

import (
	"context"
	"sync"
	"time"

	"github.com/runbox-mcp/runbox/manifest"
)

// LabelPooled marks a box started ahead of a job.
const LabelPooled = "io.runbox.pooled"

const (
	// refillBackoff keeps a failing platform from being asked again at once.
	refillBackoff = 5 * time.Second
	// quietPeriod is how long the runner must have been idle before the
	// pool starts a box: a refill (a box start, a preload such as pandas)
	// takes CPU, and on a small host it would make the very next call
	// slower than a cold one. Back-to-back calls leave no such gap; an
	// agent that thinks between calls does.
	quietPeriod = 200 * time.Millisecond
)

// pool keeps, per language, boxes started and waiting in runbox-init for
// their one job, on every platform alike. A box is taken by one call and
// removed after it; the pool starts another once the runner is quiet.
type pool struct {
	r      *BoxRunner
	ctx    context.Context // ends with drain: starts under way are given up
	cancel context.CancelFunc
	wake   chan struct{}

	mu       sync.Mutex
	langs    map[string]*langPool
	starting int
	closed   bool
	wg       sync.WaitGroup
}

type langPool struct {
	lang     manifest.Language
	ready    []Box // oldest first
	starting int
	failedAt time.Time
}

func newPool(ctx context.Context, r *BoxRunner) *pool {
	ctx, cancel := context.WithCancel(ctx)
	p := &pool{r: r, ctx: ctx, cancel: cancel, wake: make(chan struct{}, 1), langs: map[string]*langPool{}}
	if r.m.Pool.Size > 0 {
		for _, l := range r.m.Languages {
			p.langs[l.Name] = &langPool{lang: l}
		}
		p.wg.Add(1)
		go p.loop()
	}
	return p
}

// take returns a live waiting box younger than the idle limit, or nil.
func (p *pool) take(name string) Box {
	p.mu.Lock()
	defer p.mu.Unlock()
	lp := p.langs[name]
	if lp == nil {
		return nil
	}
	for len(lp.ready) > 0 {
		b := lp.ready[0]
		lp.ready = lp.ready[1:]
		if b.Alive() && time.Since(b.Started()) < p.r.m.Pool.Idle() {
			return b
		}
		p.r.remove(b)
	}
	return nil
}

// kick asks the pool to look at what is missing.
func (p *pool) kick() {
	select {
	case p.wake <- struct{}{}:
	default:
	}
}

// loop starts missing boxes whenever the runner is quiet, until drain.
func (p *pool) loop() {
	defer p.wg.Done()
	tick := time.NewTicker(quietPeriod / 2)
	defer tick.Stop()
	for {
		select {
		case <-p.ctx.Done():
			return
		case <-p.wake:
		case <-tick.C:
		}
		if p.r.quiet(quietPeriod) {
			p.fill()
		}
	}
}

// fill starts boxes for the languages short of the pool's size, within
// the refill concurrency.
func (p *pool) fill() {
	p.mu.Lock()
	defer p.mu.Unlock()
	for _, lp := range p.langs {
		if p.closed || time.Since(lp.failedAt) < refillBackoff {
			continue
		}
		for len(lp.ready)+lp.starting < p.r.m.Pool.Size && p.starting < max(1, p.r.m.Pool.RefillConcurrency) {
			lp.starting++
			p.starting++
			p.wg.Add(1)
			go p.startOne(lp)
		}
	}
}

func (p *pool) startOne(lp *langPool) {
	defer p.wg.Done()
	m := p.r.m
	var b Box
	err := p.r.d.Ready(p.ctx)
	if err == nil {
		b, err = p.r.start(p.ctx, BoxSpec{Language: lp.lang,
			Labels:   p.r.owner.Labels(map[string]string{LabelLanguage: lp.lang.Name, LabelPooled: "true"}),
			InitArgs: prestartArgs(m, lp.lang, p.r.d.Isolation()),
			Pooled:   true,
			Lifetime: m.Pool.Idle() + m.Limits.MaxTimeout() + backstopGrace})
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	lp.starting--
	p.starting--
	switch {
	case err != nil:
		lp.failedAt = time.Now()
		if p.ctx.Err() == nil {
			p.r.log.Warn("could not start a pooled box", "language", lp.lang.Name, "err", err)
		}
	case p.closed:
		p.r.remove(b)
	default:
		lp.ready = append(lp.ready, b)
	}
	p.kick()
}

// expire removes boxes that waited too long or died while waiting; the
// loop replaces them.
func (p *pool) expire() {
	p.mu.Lock()
	defer p.mu.Unlock()
	for _, lp := range p.langs {
		keep := lp.ready[:0]
		for _, b := range lp.ready {
			if !b.Alive() || time.Since(b.Started()) >= p.r.m.Pool.Idle() {
				p.r.remove(b)
				continue
			}
			keep = append(keep, b)
		}
		lp.ready = keep
	}
	p.kick()
}

// drain stops refills, gives up starts under way and removes every
// waiting box.
func (p *pool) drain() {
	p.mu.Lock()
	p.closed = true
	p.mu.Unlock()
	p.cancel()
	p.wg.Wait()
	p.mu.Lock()
	defer p.mu.Unlock()
	for _, lp := range p.langs {
		for _, b := range lp.ready {
			p.r.remove(b)
		}
		lp.ready = nil
	}
}

// idle reports how many boxes wait, per language.
func (p *pool) idle() map[string]int {
	p.mu.Lock()
	defer p.mu.Unlock()
	out := map[string]int{}
	for name, lp := range p.langs {
		out[name] = len(lp.ready)
	}
	return out
}
