package initproto

import (
	"encoding/base64"
	"encoding/json"
	"io"
)

// SessionFlag, followed by an encoded Session, starts runbox-init in
// session mode: a long-lived box whose interpreter keeps its state between
// jobs, serving one job at a time on a channel the server may open again
// (after a restart) with a reset ([ResetWriter], [ResetReader]).
const SessionFlag = "--session"

// StreamInterrupt is opened by the server to interrupt the running cell
// of a session (Python: KeyboardInterrupt); it carries only its header
// and is answered by nothing: the job's report says what happened.
const StreamInterrupt = "interrupt"

// StreamCollect is opened by a server that adopts a run it did not start
// (a restarted server, [Header] Run naming the run): the box answers it as
// it would have answered the run's job stream, with the report once the
// run has ended, then its artifacts; a run the box does not hold is
// answered by closing the stream. A one-off box and a session's cell alike
// keep their run's report when the channel that sent the job broke.
const StreamCollect = "collect"

// StreamCells is opened by the server once per channel of a session box
// and carries all the cells sent over that channel: each message on it is
// a job (as on a StreamJob stream), answered on it by the job's report
// before the next is sent; artifacts follow on streams of their own. The
// stream stays open between cells, so a cell costs no stream's opening
// and closing frames, each a trip through the engine's copies. A box that
// does not know the kind (an older runbox-init) reads the first message
// and closes the stream without running its job, and the server sends its
// cells on job streams instead.
const StreamCells = "cells"

// SendCell sends a job on a StreamCells stream.
func SendCell(w io.Writer, job *Job) error {
	return sendJob(w, StreamCells, job)
}

// Session is the interpreter a session box keeps running.
type Session struct {
	// Driver names the persistent interpreter's driver: python, node or
	// bash (the language's error format).
	Driver string `json:"driver"`
	// Interpreter is the program that runs the driver (python3, node,
	// bash: the first word of the language's command).
	Interpreter string   `json:"interpreter"`
	Env         []string `json:"env"`
	Dir         string   `json:"dir"`
	CodePath    string   `json:"code_path"`
	CPUSeconds  int64    `json:"cpu_seconds,omitempty"`
	NProc       int64    `json:"nproc,omitempty"`
	// CA is Job.CA, for the interpreter that starts with the box.
	CA []byte `json:"ca,omitempty"`
	// Restorable: the box may be checkpointed and restored with its
	// memory (gVisor). Its stdin stays as the runtime gave it: runsc
	// plumbs a restored box's stdin anew, and a descriptor read through
	// Go's poller before the checkpoint is not heard after the restore.
	Restorable bool `json:"restorable,omitempty"`
	// Direct: runbox-init listens on [DirectSocket] from before the
	// interpreter starts, for channels from a server on the box's own
	// host (the Docker driver's direct channel).
	Direct bool `json:"direct,omitempty"`
}

// SessionState rides on every report of a session box.
type SessionState struct {
	// Calls counts the jobs the session has run, this one included.
	Calls int `json:"calls"`
	// Lost says why the interpreter, and with it the session's state, is
	// gone; empty while it lives.
	Lost string `json:"lost,omitempty"`
	// Interrupted: the call was interrupted and the interpreter survived.
	Interrupted bool `json:"interrupted,omitempty"`
}

// EncodeSession turns a Session into one command-line argument.
func EncodeSession(s Session) string {
	b, _ := json.Marshal(s)
	return base64.RawURLEncoding.EncodeToString(b)
}

// DecodeSession reads EncodeSession's argument.
func DecodeSession(s string) (Session, error) {
	var out Session
	b, err := base64.RawURLEncoding.DecodeString(s)
	if err == nil {
		err = json.Unmarshal(b, &out)
	}
	return out, err
}
