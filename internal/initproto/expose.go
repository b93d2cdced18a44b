package initproto

import (
	"bufio"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"strings"
)

// StreamExpose is opened by the server, in a session box, for one
// connection a person made to an exposure of the box's port (the server's
// own listener on the host): its header's Data is an [ExposeRequest];
// runbox-init connects to 127.0.0.1 at that port inside the box and
// answers one line, [ExposeOK] or "error: ..." and a newline, before the
// connection's raw bytes flow both ways. Only the server opens it; the box
// keeps no interface but lo and no host socket.
const StreamExpose = "expose"

// ExposeOK is the line runbox-init answers once it has connected.
const ExposeOK = "ok"

// maxExposeLine bounds runbox-init's answer line.
const maxExposeLine = 1024

// ExposeRequest names the box's port a connection goes to.
type ExposeRequest struct {
	Port int `json:"port"`
}

// SendExpose opens an expose stream's request for port.
func SendExpose(w io.Writer, port int) error {
	data, err := json.Marshal(ExposeRequest{Port: port})
	if err != nil {
		return err
	}
	return Send(w, Header{Kind: StreamExpose, Data: data})
}

// ExposePort is the port an expose stream's header names, checked.
func ExposePort(h Header) (int, error) {
	var req ExposeRequest
	if err := json.Unmarshal(h.Data, &req); err != nil {
		return 0, fmt.Errorf("a malformed expose request: %w", err)
	}
	if req.Port < 1 || req.Port > 65535 {
		return 0, fmt.Errorf("port %d is not a TCP port", req.Port)
	}
	return req.Port, nil
}

// ReadExposeAnswer reads runbox-init's answer line one byte at a time, so
// that no byte of the connection that follows it is taken: nil for
// ExposeOK, the box's reason otherwise.
func ReadExposeAnswer(r io.Reader) error {
	var line []byte
	b := make([]byte, 1)
	for len(line) < maxExposeLine {
		if _, err := io.ReadFull(r, b); err != nil {
			return fmt.Errorf("reading the box's answer: %w", err)
		}
		if b[0] == '\n' {
			s := string(line)
			if s == ExposeOK {
				return nil
			}
			return errors.New(strings.TrimPrefix(strings.ToValidUTF8(s, "?"), "error: "))
		}
		line = append(line, b[0])
	}
	return errors.New("the box's answer is too long")
}

// WriteExposeAnswer writes runbox-init's answer line: ExposeOK for nil.
func WriteExposeAnswer(w io.Writer, err error) error {
	line := ExposeOK
	if err != nil {
		line = "error: " + strings.ReplaceAll(err.Error(), "\n", " ")
		if len(line) > maxExposeLine-1 {
			line = line[:maxExposeLine-1]
		}
	}
	bw := bufio.NewWriter(w)
	_, _ = bw.WriteString(line + "\n")
	return bw.Flush()
}
