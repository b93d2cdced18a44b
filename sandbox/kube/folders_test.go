package kube

import (
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"

	"github.com/runbox-mcp/runbox/manifest"
	"github.com/runbox-mcp/runbox/sandbox"
)

func TestKubeFoldersReadOnlyHostPaths(t *testing.T) {
	k := testKube(t, func(m *manifest.Manifest) { m.Mounts = []manifest.Mount{{Name: "data", Path: "/srv/data"}} })
	p := k.podSpec("runbox-python-x", k.m.Languages[0], nil, time.Minute, nil)
	before := len(p.Spec.Volumes)
	k.withFolders(p, []sandbox.HostMount{{Source: "/home/me/proj", Target: "/mnt/roots/proj"}})
	vols := p.Spec.Volumes[before:]
	if len(vols) != 2 || vols[0].HostPath.Path != "/srv/data" || vols[1].HostPath.Path != "/home/me/proj" || *vols[1].HostPath.Type != corev1.HostPathDirectory {
		t.Fatalf("volumes %+v", vols)
	}
	got := map[string]corev1.VolumeMount{}
	for _, m := range p.Spec.Containers[0].VolumeMounts {
		got[m.MountPath] = m
	}
	for _, path := range []string{"/mnt/data", "/mnt/roots/proj"} {
		m := got[path]
		if !m.ReadOnly || *m.RecursiveReadOnly != corev1.RecursiveReadOnlyIfPossible || *m.MountPropagation != corev1.MountPropagationNone {
			t.Errorf("%s: %+v", path, m)
		}
	}
	for _, c := range p.Spec.InitContainers {
		if len(c.VolumeMounts) > 1 {
			t.Errorf("init container %s sees the folders", c.Name)
		}
	}
}
