package docker

import (
	"bufio"
	"bytes"
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"strings"
	"time"

	"github.com/moby/moby/client"

	"github.com/runbox-mcp/runbox/internal/initproto"
	"github.com/runbox-mcp/runbox/sandbox"
)

// relayWait bounds how long a relay may take to answer.
const relayWait = 10 * time.Second

// errRelayBusy: an attach holds the box's stdin open.
var errRelayBusy = errors.New("an attach holds the box's stdin")

// attachRelayed is viaRelay, asked once more after a moment when the box
// answered busy: a box reads the end of its stdin a little after the
// attach that held it closed (this server's own, when its channel broke).
func (d *Docker) attachRelayed(ctx context.Context, id string) (client.ContainerAttachResult, bool, error) {
	att, ok, err := d.viaRelay(ctx, id)
	if ok || !errors.Is(err, errRelayBusy) {
		return att, ok, err
	}
	select {
	case <-time.After(250 * time.Millisecond):
	case <-ctx.Done():
		return att, false, ctx.Err()
	}
	return d.viaRelay(ctx, id)
}

// viaRelay reaches a Podman box whose stdin may have ended with its
// server's attach (internal/initproto relay.go): it execs `runbox-init
// relay` in the box as uid 0 and returns the exec's stream as the box's
// attach once runbox-init answered ready. ok is false, and the stream
// closed, when the box answered busy (an attach holds its stdin open: a
// new attach reaches it) or could not be reached this way (a box started
// without a relay); err says why, for the log.
func (d *Docker) viaRelay(ctx context.Context, id string) (att client.ContainerAttachResult, ok bool, err error) {
	ex, err := d.cli.ExecCreate(ctx, id, client.ExecCreateOptions{
		User: "0", AttachStdin: true, AttachStdout: true, AttachStderr: true,
		Cmd: []string{sandbox.InitPath, initproto.RelayArg},
	})
	if err != nil {
		return att, false, err
	}
	res, err := d.cli.ExecAttach(ctx, ex.ID, client.ExecAttachOptions{})
	if err != nil {
		return att, false, err
	}
	att = client.ContainerAttachResult{HijackedResponse: res.HijackedResponse}
	_ = att.Conn.SetReadDeadline(time.Now().Add(relayWait))
	answer, rest, err := relayAnswer(att.Reader)
	_ = att.Conn.SetReadDeadline(time.Time{})
	if err != nil || answer != initproto.RelayReady {
		att.Close()
		switch {
		case err != nil:
		case answer == initproto.RelayBusy:
			err = errRelayBusy
		default:
			err = fmt.Errorf("the box answered %q", answer)
		}
		return att, false, err
	}
	att.Reader = bufio.NewReader(io.MultiReader(bytes.NewReader(rest), att.Reader))
	return att, true, nil
}

// relayAnswer reads the first byte of an exec's multiplexed stdout (the
// engine's stdcopy frames: an 8-byte header naming the stream and the
// payload's length) and returns it with the frames' bytes that follow it,
// framed again. What the relay wrote on stderr before it is the error.
func relayAnswer(r io.Reader) (byte, []byte, error) {
	var stderr strings.Builder
	for {
		var h [8]byte
		if _, err := io.ReadFull(r, h[:]); err != nil {
			if msg := strings.TrimSpace(stderr.String()); msg != "" {
				return 0, nil, errors.New(msg)
			}
			return 0, nil, err
		}
		n := binary.BigEndian.Uint32(h[4:])
		if n > 1<<16 {
			return 0, nil, fmt.Errorf("a frame of %d bytes before the relay's answer", n)
		}
		payload := make([]byte, n)
		if _, err := io.ReadFull(r, payload); err != nil {
			return 0, nil, err
		}
		if h[0] != 1 || n == 0 {
			if stderr.Len() < 4<<10 {
				stderr.Write(payload)
			}
			continue
		}
		var rest []byte
		if n > 1 {
			binary.BigEndian.PutUint32(h[4:], n-1)
			rest = append(h[:], payload[1:]...)
		}
		return payload[0], rest, nil
	}
}
