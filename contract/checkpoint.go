package contract

import "fmt"

// Error kinds of the checkpoint tools (session_checkpoint, session_restore,
// session_fork); run_code never answers them.
const (
	// KindCheckpointNotFound: no checkpoint of this caller has the id.
	KindCheckpointNotFound Kind = "checkpoint_not_found"
	// KindCheckpointInvalid: the checkpoint's record or image changed on
	// disk since it was taken (its keyed MAC does not match); it is never
	// restored.
	KindCheckpointInvalid Kind = "checkpoint_invalid"
)

// LimitCheckpoints is the limit of a checkpoint refused past its caps.
const LimitCheckpoints = "checkpoints"

// Restore modes: how a restored or forked session got its state.
const (
	// RestoredMemory: the interpreter's memory itself (gVisor).
	RestoredMemory = "memory"
	// RestoredReplayed: a new interpreter that ran the session's cells
	// again, in order.
	RestoredReplayed = "replayed"
)

// NoCheckpoint refuses an id that is not the caller's checkpoint.
func NoCheckpoint() ErrorInfo {
	return ErrorInfo{Kind: KindCheckpointNotFound, Message: "no checkpoint has this id for this client (unknown, deleted or expired)",
		Hint: "Use a checkpoint_id that session_checkpoint returned to you, or take a new checkpoint of a session."}
}

// CheckpointTampered refuses a checkpoint whose record or image changed.
func CheckpointTampered(what string) ErrorInfo {
	return ErrorInfo{Kind: KindCheckpointInvalid, Message: "the checkpoint failed verification and was not restored: " + what,
		Hint: "Its files changed on disk since it was taken; take a new checkpoint. The operator should check who writes to the state directory."}
}

// CheckpointsFull refuses a checkpoint past a count or byte cap.
func CheckpointsFull(what string, max int64) ErrorInfo {
	return ErrorInfo{Kind: KindResourceLimit, Limit: LimitCheckpoints,
		Message: fmt.Sprintf("%s: at most %d", what, max),
		Hint:    "Restore or wait for an old checkpoint to expire, or close sessions you no longer need."}
}
