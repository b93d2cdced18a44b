package docker

import (
	"context"
	"maps"
	"slices"
	"strings"
	"time"

	"github.com/runbox-mcp/runbox/internal/initproto"
	"github.com/runbox-mcp/runbox/sandbox"

	cerrdefs "github.com/containerd/errdefs"
	"github.com/moby/moby/api/types/container"
	"github.com/moby/moby/client"
)

// Reap removes the boxes whose server is gone: from this host, those whose
// owner process no longer runs, but for a box kept by another state
// directory's store (sandbox.KeptElsewhere); from other hosts sharing the
// engine, and such kept boxes, those older than any run could last; and
// this server's own that it failed to remove while the engine was away.
// It returns how many it removed. A box keep holds stays, whoever owned it
// (a store keeps its run's record).
func (d *Docker) Reap(ctx context.Context, keep func(string) bool) (int, error) {
	removed := d.retryRemovals(ctx)
	defer d.reapFolderVolumes(ctx)
	actx, cancel := context.WithTimeout(ctx, apiTimeout)
	defer cancel()
	list, err := d.cli.ContainerList(actx, client.ContainerListOptions{All: true,
		Filters: make(client.Filters).Add("label", sandbox.LabelManaged+"=true")})
	if err != nil {
		return 0, err
	}
	// A one-off box keeps its report for a restarted server past its
	// run (initproto.DefaultKeep).
	maxAge := d.m.Limits.MaxTimeout() + d.m.Pool.Idle() + sandbox.BackstopGrace + 2*apiTimeout + initproto.DefaultKeep
	for _, c := range list.Items {
		if keep != nil && keep(c.ID) {
			continue
		}
		if isSession, keep := keepSessionBox(c.Labels, c.State, time.Unix(c.Created, 0), time.Now()); isSession {
			if keep {
				continue
			}
		} else if alive, known := sandbox.OwnerAlive(c.Labels, d.owner); alive ||
			((!known || sandbox.KeptElsewhere(keptState(c.Names), d.owner)) && time.Since(time.Unix(c.Created, 0)) <= maxAge) {
			continue
		}
		rctx, rcancel := context.WithTimeout(ctx, apiTimeout)
		_, err := d.cli.ContainerRemove(rctx, c.ID, client.ContainerRemoveOptions{Force: true})
		rcancel()
		if err != nil && !cerrdefs.IsNotFound(err) {
			d.log.Warn("reaping a leftover box failed", "container", c.ID, "err", err)
			continue
		}
		removed++
		d.log.Info("reaped a leftover box", "container", c.ID[:12], "owner_pid", c.Labels[sandbox.LabelOwnerPID], "run_id", c.Labels[sandbox.LabelRunID])
	}
	return removed, nil
}

var _ sandbox.Keeper = (*Docker)(nil)

// keptPrefix begins the name of a box marked kept (MarkKept): Docker's
// labels are fixed at creation, a name is not.
const keptPrefix = "runbox-kept-"

// MarkKept renames box id runbox-kept-<state>-<id>: the mark the reapers
// of other state directories read (keptState).
func (d *Docker) MarkKept(ctx context.Context, id string) error {
	return d.markKept(ctx, id, d.owner.State)
}

// markKept marks box id as kept by state's store ("" marks nothing). A box
// already gone, or being removed (a short task's run ended first), needs
// no mark.
func (d *Docker) markKept(ctx context.Context, id, state string) error {
	if state == "" {
		return nil
	}
	ctx, cancel := context.WithTimeout(ctx, apiTimeout)
	defer cancel()
	_, err := d.cli.ContainerRename(ctx, id, client.ContainerRenameOptions{NewName: keptName(state, id)})
	if cerrdefs.IsNotFound(err) || cerrdefs.IsConflict(err) {
		return nil
	}
	return err
}

func keptName(state, id string) string {
	return keptPrefix + state + "-" + id[:min(len(id), 12)]
}

// keptState reads a kept box's state directory from its names ("" for a
// box not marked).
func keptState(names []string) string {
	for _, n := range names {
		if rest, ok := strings.CutPrefix(strings.TrimPrefix(n, "/"), keptPrefix); ok {
			if state, _, ok := strings.Cut(rest, "-"); ok {
				return state
			}
		}
	}
	return ""
}

// SetKeep makes every reap, the runner's and the one Ready starts, leave
// the boxes keep holds.
func (d *Docker) SetKeep(keep func(string) bool) {
	d.mu.Lock()
	d.keep = keep
	d.mu.Unlock()
}

func (d *Docker) retryRemovals(ctx context.Context) int {
	d.mu.Lock()
	ids := slices.Collect(maps.Keys(d.unremoved))
	d.mu.Unlock()
	removed := 0
	for _, id := range ids {
		rctx, cancel := context.WithTimeout(ctx, apiTimeout)
		_, err := d.cli.ContainerRemove(rctx, id, client.ContainerRemoveOptions{Force: true})
		cancel()
		if err != nil && !cerrdefs.IsNotFound(err) {
			continue
		}
		d.mu.Lock()
		delete(d.unremoved, id)
		d.mu.Unlock()
		removed++
		d.log.Info("removed a box left while the engine was away", "container", id[:min(12, len(id))])
	}
	return removed
}

// keepSessionBox says whether a box with labels is a session's and, if
// so, whether the reaper leaves it. A session outlives its server; it
// ends at its lifetime, or when its box stopped (nothing can use it
// again). A box not started yet is another server's session being
// opened: removing it would kill the session under its first call. One
// left created for longer than a start takes is a start that failed.
func keepSessionBox(labels map[string]string, state container.ContainerState, created, now time.Time) (isSession, keep bool) {
	isSession, expired := sandbox.SessionBoxExpired(labels, now)
	if !isSession || expired {
		return isSession, false
	}
	return true, state == container.StateRunning || (state == container.StateCreated && now.Sub(created) <= 2*apiTimeout)
}
