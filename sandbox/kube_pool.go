package sandbox

import (
	"context"
	"sync"
	"time"
)

// kubePool keeps, per language, pods started and waiting in runbox-init
// for their one job (the manifest's pool section). A pod is taken by one
// call and deleted after it; the pool starts another in the background.
type kubePool struct {
	k      *Kube
	sem    chan struct{}
	mu     sync.Mutex
	ready  map[string][]*pod // oldest first
	start  map[string]int    // pods being started
	failed map[string]time.Time
	closed bool
	wg     sync.WaitGroup
	// ctx ends with drain: pods still starting are given up and deleted.
	ctx    context.Context
	cancel context.CancelFunc
}

func newKubePool(k *Kube) *kubePool {
	ctx, cancel := context.WithCancel(context.Background())
	return &kubePool{k: k, sem: make(chan struct{}, max(1, k.m.Pool.RefillConcurrency)),
		ready: map[string][]*pod{}, start: map[string]int{}, failed: map[string]time.Time{}, ctx: ctx, cancel: cancel}
}

// take returns a waiting pod younger than the idle limit, or nil. A pod
// that died meanwhile is found out at attach and answers sandbox, like a
// deleted one.
func (p *kubePool) take(lang string) *pod {
	p.mu.Lock()
	defer p.mu.Unlock()
	for len(p.ready[lang]) > 0 {
		b := p.ready[lang][0]
		p.ready[lang] = p.ready[lang][1:]
		if time.Since(b.started) < p.k.m.Pool.Idle() {
			return b
		}
		p.k.deleteLater(b.name)
	}
	return nil
}

func (p *kubePool) refillAll() {
	for _, l := range p.k.m.Languages {
		p.refill(l.Name)
	}
}

// refill starts pods until the language's pool is full again.
func (p *kubePool) refill(name string) {
	size := p.k.m.Pool.Size
	if size == 0 {
		return
	}
	lang, ok := p.k.m.Language(name)
	if !ok {
		return
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.closed || time.Since(p.failed[name]) < refillBackoff {
		return
	}
	for n := len(p.ready[name]) + p.start[name]; n < size; n++ {
		p.start[name]++
		p.wg.Add(1)
		go func() {
			defer p.wg.Done()
			select {
			case p.sem <- struct{}{}:
			case <-p.ctx.Done():
				p.mu.Lock()
				p.start[name]--
				p.mu.Unlock()
				return
			}
			defer func() { <-p.sem }()
			labels := p.k.owner.Labels(map[string]string{LabelLanguage: name, LabelPooled: "true"})
			deadline := p.k.m.Pool.Idle() + p.k.m.Limits.MaxTimeout() + backstopGrace + startTimeout
			var args []string
			if !p.k.gvisor() {
				// A python pod imports its preloads while it waits.
				args = prestartArgs(p.k.m, lang)
			}
			b, err := p.k.startPod(p.ctx, lang, labels, deadline, args)
			p.mu.Lock()
			defer p.mu.Unlock()
			p.start[name]--
			switch {
			case err != nil:
				p.failed[name] = time.Now()
				p.k.log.Debug("pool: starting a pod failed", "language", name, "err", err)
			case p.closed:
				p.k.deleteLater(b.name)
			default:
				p.ready[name] = append(p.ready[name], b)
			}
		}()
	}
}

// expire replaces pods that waited past the idle limit.
func (p *kubePool) expire() {
	p.mu.Lock()
	var langs []string
	for name, list := range p.ready {
		keep := list[:0]
		for _, b := range list {
			if time.Since(b.started) >= p.k.m.Pool.Idle() {
				p.k.deleteLater(b.name)
				continue
			}
			keep = append(keep, b)
		}
		p.ready[name] = keep
		langs = append(langs, name)
	}
	p.mu.Unlock()
	for _, l := range langs {
		p.refill(l)
	}
}

func (p *kubePool) idle() map[string]int {
	p.mu.Lock()
	defer p.mu.Unlock()
	out := map[string]int{}
	for name, list := range p.ready {
		out[name] = len(list)
	}
	return out
}

// drain stops refills and deletes the waiting pods.
func (p *kubePool) drain() {
	p.mu.Lock()
	p.closed = true
	p.mu.Unlock()
	p.cancel()
	p.wg.Wait()
	p.mu.Lock()
	defer p.mu.Unlock()
	for name, list := range p.ready {
		for _, b := range list {
			p.k.deleteLater(b.name)
		}
		delete(p.ready, name)
	}
}
