package kube

import (
	"strconv"

	corev1 "k8s.io/api/core/v1"

	"github.com/runbox-mcp/runbox/sandbox"
)

// withFolders mounts the manifest's declared folders and the box's own (a
// client's roots) into the pod's box read-only, as hostPath volumes: the
// paths are the node's, which on a single-node cluster (or with the folder
// at the same path on every node) is the server's. Read-only is recursive
// where the node's runtime can make it so (recursiveReadOnly: IfPossible);
// on one that cannot, a host mount under the folder stays as the host has
// it. A link inside resolves in the box's own file system, as on Docker.
func (k *Kube) withFolders(pod *corev1.Pod, extra []sandbox.HostMount) {
	type folder struct{ source, target string }
	var all []folder
	for _, mt := range k.m.Mounts {
		all = append(all, folder{mt.Path, mt.Target()})
	}
	for _, hm := range extra {
		all = append(all, folder{hm.Source, hm.Target})
	}
	if len(all) == 0 {
		return
	}
	dir := corev1.HostPathDirectory
	rro := corev1.RecursiveReadOnlyIfPossible
	none := corev1.MountPropagationNone
	box := &pod.Spec.Containers[0]
	for i, f := range all {
		name := "folder-" + strconv.Itoa(i)
		pod.Spec.Volumes = append(pod.Spec.Volumes, corev1.Volume{Name: name,
			VolumeSource: corev1.VolumeSource{HostPath: &corev1.HostPathVolumeSource{Path: f.source, Type: &dir}}})
		box.VolumeMounts = append(box.VolumeMounts, corev1.VolumeMount{Name: name, MountPath: f.target,
			ReadOnly: true, RecursiveReadOnly: &rro, MountPropagation: &none})
	}
}
