package doctor

import (
	"os"
	"os/exec"
	"strings"

	"github.com/runbox-mcp/runbox/manifest"
)

// workspaceTools are the host commands a named workspace needs: its file
// system made, attached to a loop device and mounted.
var workspaceTools = []string{"mkfs.ext4", "losetup", "mount", "umount"}

// workspaceCheck checks that this host can keep the manifest's named
// workspaces; false when the manifest offers none.
func workspaceCheck(m *manifest.Manifest, euid int) (Check, bool) {
	w := m.Workspaces
	if !w.Enabled {
		return Check{}, false
	}
	c := Check{Name: "workspaces"}
	if m.Backend == manifest.BackendKubernetes {
		class := "the cluster's default storage class"
		if sc := m.Kubernetes.WorkspaceStorageClass; sc != "" {
			class = "storage class " + sc
		}
		c.Status, c.Detail = OK, "PersistentVolumeClaims of "+w.Quota.String()+" in namespace "+m.Kubernetes.Namespace+", of "+class+
			" (its provisioner must enforce the size)"
		return c, true
	}
	var missing []string
	for _, tool := range workspaceTools {
		if _, err := exec.LookPath(tool); err != nil {
			missing = append(missing, tool)
		}
	}
	switch {
	case len(missing) > 0:
		c.Status, c.Detail = Fail, "missing on this host: "+strings.Join(missing, ", ")
		c.Fix = "Install e2fsprogs and util-linux (Debian: apt-get install e2fsprogs mount)."
	case euid != 0:
		c.Status, c.Detail = Fail, "runbox does not run as root, and mounting a workspace's loop device needs it"
		c.Fix = "Run the server as root, or set workspaces.enabled: false."
	default:
		if _, err := os.Stat("/dev/loop-control"); err != nil {
			c.Status, c.Detail = Fail, "no /dev/loop-control: this host has no loop devices"
			c.Fix = "Load the loop module (modprobe loop), or set workspaces.enabled: false."
			return c, true
		}
		where := w.Dir
		if where == "" {
			where = "the state directory's workspaces/"
		}
		c.Status, c.Detail = OK, "ext4 images of "+w.Quota.String()+" on loop devices, in "+where
	}
	return c, true
}
