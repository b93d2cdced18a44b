package docker

import (
	"context"
	"maps"
	"strings"

	cerrdefs "github.com/containerd/errdefs"
	"github.com/moby/moby/client"
)

// Engine describes the Docker engine, for `runbox doctor`.
type Engine struct {
	Product       string            `json:"product"` // Docker or Podman
	Version       string            `json:"version"`
	APIVersion    string            `json:"api_version"` // negotiated
	OS            string            `json:"os"`
	Kernel        string            `json:"kernel"`
	Arch          string            `json:"arch"`
	CgroupVersion string            `json:"cgroup_version"`
	CgroupDriver  string            `json:"cgroup_driver"`
	Runtimes      map[string]string `json:"runtimes"` // name → path
	// RuncVersion is what the engine reports of its runc (version or
	// distribution build).
	RuncVersion string `json:"runc_version"`
}

// Engine asks the engine about itself.
func (d *Docker) Engine(ctx context.Context) (Engine, error) {
	actx, cancel := context.WithTimeout(ctx, apiTimeout)
	defer cancel()
	res, err := d.cli.Info(actx, client.InfoOptions{})
	if err != nil {
		return Engine{}, engineError(err)
	}
	info := res.Info
	e := Engine{Version: info.ServerVersion, APIVersion: d.cli.ClientVersion(), OS: info.OperatingSystem,
		Kernel: info.KernelVersion, Arch: info.Architecture, CgroupVersion: info.CgroupVersion,
		CgroupDriver: info.CgroupDriver, Runtimes: map[string]string{}, RuncVersion: info.RuncCommit.ID}
	if e.CgroupVersion == "" {
		e.CgroupVersion = "1" // engines before API 1.40 say nothing: v1
	}
	for name, r := range info.Runtimes {
		e.Runtimes[name] = r.Path
	}
	e.Product = "Docker"
	if ver, err := d.cli.ServerVersion(actx, client.ServerVersionOptions{}); err == nil && isPodman(ver.Components) {
		// Podman leaves RuncCommit empty and names its runtime's build
		// in /version instead ("commit: 1.1.5+ds1-1+deb12u1").
		e.Product = "Podman"
		for _, c := range ver.Components {
			if c.Name == "OCI Runtime (runc)" && e.RuncVersion == "" {
				for _, line := range strings.Split(c.Version, "\n") {
					if v, ok := strings.CutPrefix(line, "commit: "); ok {
						e.RuncVersion = v
					}
				}
			}
		}
	}
	return e, nil
}

// ImageInfo is an image on the engine.
type ImageInfo struct {
	ID     string            `json:"id"`
	Labels map[string]string `json:"labels,omitempty"`
}

// Image inspects an image; a missing one is an EngineError with the fix.
func (d *Docker) Image(ctx context.Context, ref string) (ImageInfo, error) {
	actx, cancel := context.WithTimeout(ctx, apiTimeout)
	defer cancel()
	ins, err := d.cli.ImageInspect(actx, ref)
	if err != nil {
		if cerrdefs.IsNotFound(err) {
			return ImageInfo{}, imageMissing(ref)
		}
		return ImageInfo{}, engineError(err)
	}
	info := ImageInfo{ID: ins.ID}
	if ins.Config != nil {
		info.Labels = maps.Clone(ins.Config.Labels)
	}
	return info, nil
}
