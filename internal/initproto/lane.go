package initproto

import (
	"bytes"
	"errors"
	"io"
)

// A session box reached on its direct socket ([DirectSocket]) runs its
// cells on a lane: a connection of its own beside the channel, which
// carries each cell's job and its report as plain messages, without the
// multiplexer. Through a stream of the channel, each message passes the
// multiplexer's send loop and its receive loop on both ends: goroutines
// handing the bytes to one another, each hand-off a thread woken
// (docs/performance.md). What else a cell's run opens (its artifacts,
// tool calls, proxied connections), an interrupt, a peek and a collect
// stay on the channel, whose session the lane serves.
//
// The server asks for a lane on a stream of kind StreamLane; the box
// answers with a token naming that channel. The server dials the direct
// socket again and writes LaneHello(token); the box answers Ack(token)
// and reads cells from then on: messages as on a cells stream
// ([StreamCells] and [SendCell]), each answered with its report
// ([SendReport]). The lane ends with its channel. A box that knows no
// lanes closes the StreamLane stream unanswered: its cells go on a cells
// stream.
const StreamLane = "lane"

// LaneTokenSize is the size of a lane's token.
const LaneTokenSize = 16

var laneMagic = []byte("RBXLANE1")

// LaneHello is the first bytes the server writes on a lane's connection.
func LaneHello(token []byte) []byte {
	return append(append([]byte{resetByte}, laneMagic...), token...)
}

// ReadLaneHello reads the start of a connection to the direct socket. A
// lane's connection gives its token; any other (a channel's, which starts
// with a reset) gives the bytes read, which belong to it.
func ReadLaneHello(r io.Reader) (token, read []byte, err error) {
	head := make([]byte, 1+len(laneMagic))
	if _, err := io.ReadFull(r, head); err != nil {
		return nil, nil, err
	}
	if head[0] != resetByte || !bytes.Equal(head[1:], laneMagic) {
		return nil, head, nil
	}
	token = make([]byte, LaneTokenSize)
	if _, err := io.ReadFull(r, token); err != nil {
		return nil, nil, err
	}
	return token, nil, nil
}

// ErrNoLane is a box that did not take a lane's hello.
var ErrNoLane = errors.New("initproto: the box did not take the lane")

// AwaitLaneAck reads the box's answer to a lane's hello.
func AwaitLaneAck(r io.Reader, token []byte) error {
	want := Ack(token)
	got := make([]byte, len(want))
	if _, err := io.ReadFull(r, got); err != nil {
		return errors.Join(ErrNoLane, err)
	}
	if !bytes.Equal(got, want) {
		return ErrNoLane
	}
	return nil
}
