//go:build linux

package boxinit

import (
	"encoding/binary"
	"fmt"
	"net"
	"os"
	"syscall"

	"golang.org/x/sys/unix"
)

// unplugMain is runbox-init initproto.UnplugArg: it removes every network
// interface but the loopback from its network namespace and exits. It is
// the Kubernetes backend's init step, so a pod has exactly what a Docker
// box has (lo) whatever the cluster's CNI gave it and whether or not it
// enforces NetworkPolicy. That step alone holds CAP_NET_ADMIN, over the
// pod's namespace only; the program's container has no capability at all.
func unplugMain() int {
	if err := unplug(); err != nil {
		fmt.Fprintln(os.Stderr, "runbox-init: unplug:", err)
		return 1
	}
	return 0
}

// unplug deletes every interface but the loopback, then checks that only
// loopbacks are left: it fails closed.
func unplug() error {
	ifs, err := net.Interfaces()
	if err != nil {
		return err
	}
	for _, i := range ifs {
		if i.Flags&net.FlagLoopback != 0 {
			continue
		}
		// Deleting one end of a veth pair deletes the other: gone is fine.
		if err := delLink(i.Index); err != nil && err != unix.ENODEV {
			return fmt.Errorf("deleting %s: %w", i.Name, err)
		}
	}
	left, err := net.Interfaces()
	if err != nil {
		return err
	}
	for _, i := range left {
		if i.Flags&net.FlagLoopback == 0 {
			return fmt.Errorf("%s is still there", i.Name)
		}
	}
	return nil
}

// delLink sends RTM_DELLINK for an interface index over rtnetlink and
// waits for the kernel's acknowledgement.
func delLink(index int) error {
	fd, err := unix.Socket(unix.AF_NETLINK, unix.SOCK_RAW|unix.SOCK_CLOEXEC, unix.NETLINK_ROUTE)
	if err != nil {
		return err
	}
	defer unix.Close(fd)
	if err := unix.Bind(fd, &unix.SockaddrNetlink{Family: unix.AF_NETLINK}); err != nil {
		return err
	}
	msg := make([]byte, unix.NLMSG_HDRLEN+unix.SizeofIfInfomsg)
	ne := binary.NativeEndian
	ne.PutUint32(msg[0:], uint32(len(msg)))
	ne.PutUint16(msg[4:], unix.RTM_DELLINK)
	ne.PutUint16(msg[6:], unix.NLM_F_REQUEST|unix.NLM_F_ACK)
	ne.PutUint32(msg[8:], 1) // sequence
	// ifinfomsg: family (AF_UNSPEC), pad, type, index, flags, change.
	ne.PutUint32(msg[unix.NLMSG_HDRLEN+4:], uint32(int32(index)))
	if err := unix.Sendto(fd, msg, 0, &unix.SockaddrNetlink{Family: unix.AF_NETLINK}); err != nil {
		return err
	}
	buf := make([]byte, 8192)
	for {
		n, _, err := unix.Recvfrom(fd, buf, 0)
		if err != nil {
			return err
		}
		msgs, err := syscall.ParseNetlinkMessage(buf[:n])
		if err != nil {
			return err
		}
		for _, m := range msgs {
			if m.Header.Type == unix.NLMSG_ERROR && len(m.Data) >= 4 {
				if code := int32(ne.Uint32(m.Data[:4])); code != 0 {
					return syscall.Errno(-code)
				}
				return nil
			}
		}
	}
}
