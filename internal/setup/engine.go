package setup

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os/exec"
	"strings"

	cerrdefs "github.com/containerd/errdefs"
	"github.com/moby/moby/api/types/build"
	"github.com/moby/moby/client"

	"github.com/runbox-mcp/runbox/images"
)

// Moby is the Engine of a Docker-API engine (Docker, Podman).
type Moby struct {
	cli *client.Client
	// podman is set by Describe when the engine is Podman.
	podman bool
}

var _ Engine = (*Moby)(nil)

// NewMoby connects to the engine the environment names (DOCKER_HOST, else
// the platform's default), with API version negotiation.
func NewMoby() (*Moby, error) {
	cli, err := client.New(client.FromEnv, client.WithAPIVersionNegotiation())
	if err != nil {
		return nil, err
	}
	return &Moby{cli: cli}, nil
}

// Close closes the client.
func (m *Moby) Close() error { return m.cli.Close() }

// Describe pings the engine and names it (product, version, API, OS/arch),
// and returns its architecture.
func (m *Moby) Describe(ctx context.Context) (desc, arch string, err error) {
	v, err := m.cli.ServerVersion(ctx, client.ServerVersionOptions{})
	if err != nil {
		return "", "", err
	}
	product := "Docker"
	for _, c := range v.Components {
		if strings.Contains(strings.ToLower(c.Name), "podman") {
			product, m.podman = "Podman", true
		}
	}
	return fmt.Sprintf("%s %s, API %s, %s/%s", product, v.Version, v.APIVersion, v.Os, v.Arch), v.Arch, nil
}

// Recipe implements Engine.
func (m *Moby) Recipe(ctx context.Context, ref string) (string, string, error) {
	ins, err := m.cli.ImageInspect(ctx, ref)
	if cerrdefs.IsNotFound(err) {
		return "", "", ErrNoImage
	}
	if err != nil {
		return "", "", err
	}
	var label string
	if ins.Config != nil {
		label = ins.Config.Labels["io.runbox.recipe"]
	}
	return ins.ID, label, nil
}

// Pull implements Engine.
func (m *Moby) Pull(ctx context.Context, ref string, progress func(string)) error {
	resp, err := m.cli.ImagePull(ctx, ref, client.ImagePullOptions{})
	if err != nil {
		return err
	}
	defer resp.Close()
	return images.ReadMessages(resp, progress)
}

// Build implements Engine with the classic builder, which every Docker
// engine and Podman's compatible API serve without a BuildKit session; on
// Podman, with the podman CLI when it is there (podmanBuild says why).
func (m *Moby) Build(ctx context.Context, req BuildRequest, progress func(string)) error {
	if m.podman {
		if p, err := exec.LookPath("podman"); err == nil {
			return podmanBuild(ctx, p, req, progress)
		}
	}
	var lines []string
	err := m.apiBuild(ctx, req, func(l string) {
		lines = append(lines, l)
		progress(l)
	})
	if err != nil && isPodmanNoMknod(lines) {
		return fmt.Errorf("%w: this engine's build containers cannot create device nodes (Podman's default capabilities lack MKNOD), which debootstrap needs: put the podman CLI on PATH (Podman Desktop installs it) so that runbox setup builds with --cap-add MKNOD, or build on a Linux host with --method host", err)
	}
	return err
}

func (m *Moby) apiBuild(ctx context.Context, req BuildRequest, progress func(string)) error {
	args := map[string]*string{}
	for k, v := range req.BuildArgs {
		args[k] = &v
	}
	resp, err := m.cli.ImageBuild(ctx, bytes.NewReader(req.Context), client.ImageBuildOptions{
		Tags:        []string{req.Tag},
		Remove:      true,
		ForceRemove: true,
		NoCache:     true,
		NetworkMode: req.Network,
		BuildArgs:   args,
		Version:     build.BuilderV1,
	})
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	return images.ReadMessages(resp.Body, progress)
}

// Tag implements Engine.
func (m *Moby) Tag(ctx context.Context, src, dst string) error {
	_, err := m.cli.ImageTag(ctx, client.ImageTagOptions{Source: src, Target: dst})
	return err
}

// Remove implements Engine.
func (m *Moby) Remove(ctx context.Context, ref string) error {
	_, err := m.cli.ImageRemove(ctx, ref, client.ImageRemoveOptions{PruneChildren: true})
	return err
}

// RemoveLabelled implements Engine: the untagged images that carry the
// label, with their untagged parents.
func (m *Moby) RemoveLabelled(ctx context.Context, key, value string) (int, error) {
	list, err := m.cli.ImageList(ctx, client.ImageListOptions{
		Filters: make(client.Filters).Add("label", key+"="+value).Add("dangling", "true"),
	})
	if err != nil {
		return 0, err
	}
	n := 0
	var errs []error
	for _, img := range list.Items {
		if _, err := m.cli.ImageRemove(ctx, img.ID, client.ImageRemoveOptions{PruneChildren: true}); err != nil {
			errs = append(errs, err)
			continue
		}
		n++
	}
	return n, errors.Join(errs...)
}
