package docker

import (
	"context"
	"time"

	"github.com/moby/moby/api/types/container"
	"github.com/moby/moby/client"

	"github.com/runbox-mcp/runbox/sandbox"
)

// FindBoxes lists the running boxes that carry all of labels (an empty
// value: the label with any value).
func (d *Docker) FindBoxes(ctx context.Context, labels map[string]string) ([]sandbox.FoundBox, error) {
	actx, cancel := context.WithTimeout(ctx, apiTimeout)
	defer cancel()
	f := make(client.Filters).Add("label", sandbox.LabelManaged+"=true").Add("status", "running")
	for k, v := range labels {
		if v == "" {
			f = f.Add("label", k) // any value
			continue
		}
		f = f.Add("label", k+"="+v)
	}
	list, err := d.cli.ContainerList(actx, client.ContainerListOptions{Filters: f})
	if err != nil {
		return nil, engineError(err)
	}
	out := make([]sandbox.FoundBox, 0, len(list.Items))
	for _, c := range list.Items {
		out = append(out, sandbox.FoundBox{ID: c.ID, Labels: c.Labels})
	}
	return out, nil
}

// Attach attaches to a running box again: its output from now on, and
// its stdin (Docker keeps a box's stdin open between attaches). On Podman,
// where a box's stdin ends with the attach that held it, the box's relay
// is tried first (viaRelay).
func (d *Docker) Attach(ctx context.Context, id string) (sandbox.Box, error) {
	// Whether the engine is Podman is known once it is ready: a server
	// adopts its runs as it starts.
	if err := d.Ready(ctx); err != nil {
		return nil, err
	}
	actx, cancel := context.WithTimeout(ctx, apiTimeout)
	defer cancel()
	b := &box{d: d, id: id, started: time.Now(), direct: d.DirectChannels()}
	var err error
	relayed := false
	if d.podman.Load() {
		if b.att, relayed, err = d.attachRelayed(actx, id); !relayed {
			d.log.Debug("podman: attaching, not relayed", "box", id, "why", err)
		}
	}
	if !relayed {
		if b.att, err = d.cli.ContainerAttach(actx, id, client.ContainerAttachOptions{Stream: true, Stdin: true, Stdout: true, Stderr: true}); err != nil {
			return nil, engineError(err)
		}
	}
	b.watch(container.WaitConditionNotRunning)
	return b, nil
}
