package setup

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"time"
)

// errStalled says the engine reported nothing for Options.Stall.
var errStalled = errors.New("the engine reported no progress")

// pull fetches the published image by digest (the engine checks the
// content against it), checks its recipe label, and tags it as o.Image.
func pull(ctx context.Context, e Engine, o Options) error {
	if !strings.Contains(o.Published, "@sha256:") {
		return fmt.Errorf("published image %q is not pinned by digest", o.Published)
	}
	o.logf("pulling %s", o.Published)
	_, _, err := e.Recipe(ctx, o.Published)
	hadIt := err == nil
	if err := watched(ctx, o.Stall, func(ctx context.Context, alive func(string)) error {
		return e.Pull(ctx, o.Published, alive)
	}); err != nil {
		return fmt.Errorf("cannot pull %s: %w", o.Published, err)
	}
	_, got, err := e.Recipe(ctx, o.Published)
	if err != nil {
		return fmt.Errorf("pulled %s, then: %w", o.Published, err)
	}
	if got != o.Recipe {
		if !hadIt {
			_ = e.Remove(ctx, o.Published)
		}
		return fmt.Errorf("published image %s carries recipe %q, this runbox's recipe is %s", o.Published, got, o.Recipe)
	}
	return e.Tag(ctx, o.Published, o.Image)
}

// watched runs f with a context that is cancelled when f calls alive for
// no stall period: an engine that cannot reach a registry (a black-holed
// network, a proxy that never answers) then fails in seconds, not at the
// engine's own timeouts minutes later.
func watched(ctx context.Context, stall time.Duration, f func(ctx context.Context, alive func(string)) error) error {
	ctx, cancel := context.WithCancelCause(ctx)
	defer cancel(nil)
	var mu sync.Mutex
	timer := time.AfterFunc(stall, func() { cancel(fmt.Errorf("%w for %s", errStalled, stall)) })
	defer timer.Stop()
	alive := func(string) {
		mu.Lock()
		defer mu.Unlock()
		timer.Reset(stall)
	}
	err := f(ctx, alive)
	if cause := context.Cause(ctx); err != nil && errors.Is(cause, errStalled) {
		return cause
	}
	return err
}
