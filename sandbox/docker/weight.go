package docker

import (
	"context"

	"github.com/moby/moby/api/types/container"
	"github.com/moby/moby/client"

	"github.com/runbox-mcp/runbox/manifest"
	"github.com/runbox-mcp/runbox/sandbox"
)

const (
	// pooledCPUShares is a pooled box's CPU weight until a job takes it
	// (the kernel's least is 2): its start-up and its preload (pandas,
	// ~0.7 CPU-s) run on what running calls leave, not beside them. The
	// CPU quota is the same as a cold box's, so on an idle host a refill
	// is as fast as before.
	pooledCPUShares = 2
	// claimedCPUShares is a cold box's weight (the engine's default).
	claimedCPUShares = 1024
)

var _ sandbox.Claimer = (*box)(nil)

// canReweigh says whether the engine can change a running box's CPU
// weight: runc on Docker can (`docker update`); runsc has no update, and
// Podman's compatible API is not relied on for it.
func (d *Docker) canReweigh() bool {
	return d.m.Isolation != manifest.IsolationGVisor && !d.podman.Load()
}

// Claim gives a pooled box a cold box's CPU weight.
func (b *box) Claim(ctx context.Context) error {
	if !b.lowWeight {
		return nil
	}
	ctx, cancel := context.WithTimeout(ctx, apiTimeout)
	defer cancel()
	_, err := b.d.cli.ContainerUpdate(ctx, b.id, client.ContainerUpdateOptions{
		Resources: &container.Resources{CPUShares: claimedCPUShares}})
	return err
}
