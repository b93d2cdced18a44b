// Package kube is the sandbox.Driver for Kubernetes: one hardened pod per
// box in the manifest's namespace (client-go), runbox-init delivered by an
// init container, the box's channel over the pod's attach stream, the
// cluster's verdict on a pod's end (OOM, deadline, eviction or deletion),
// a Lease per runbox instance, the reaper of pods whose instance is
// gone, across instances sharing the namespace, and the named workspaces
// as PersistentVolumeClaims (sandbox.VolumeDriver).
//
// It must not know the run algorithm (pool, deadlines, classification: that
// is package sandbox) nor MCP.
package kube
