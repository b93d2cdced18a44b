package tools

import (
	"context"
	"fmt"
	"time"

	"github.com/mark3labs/mcp-go/mcp"
	"github.com/mark3labs/mcp-go/server"

	"github.com/runbox-mcp/runbox/contract"
	"github.com/runbox-mcp/runbox/sandbox"
)

// Checkpoint tools' names.
const (
	SessionCheckpointName = "session_checkpoint"
	SessionRestoreName    = "session_restore"
	SessionForkName       = "session_fork"
)

// CheckpointIDArgs name one checkpoint.
type CheckpointIDArgs struct {
	CheckpointID string `json:"checkpoint_id" jsonschema:"required,description=The id session_checkpoint returned."`
}

// CheckpointResult is the structured answer of the checkpoint tools.
type CheckpointResult struct {
	Status     contract.Status         `json:"status" jsonschema:"enum=ok,enum=error"`
	Checkpoint *sandbox.CheckpointInfo `json:"checkpoint,omitempty" jsonschema:"description=The checkpoint taken."`
	Restored   *sandbox.RestoreInfo    `json:"restored,omitempty" jsonschema:"description=The new session, and how it got its state."`
	Error      *contract.ErrorInfo     `json:"error,omitempty"`
}

func checkpointAnswer(res CheckpointResult) *mcp.CallToolResult {
	res.Status = statusOf(res.Error)
	var text string
	switch {
	case res.Error != nil:
		text = errorText(res.Error)
	case res.Checkpoint != nil:
		c := res.Checkpoint
		text = fmt.Sprintf("checkpoint %s taken (%s, keeps %s, %d cells, %d bytes); pass it to session_restore until %s. The session goes on.",
			c.ID, c.Language, c.Keeps, c.Cells, c.Bytes, c.ExpiresAt.UTC().Format(time.RFC3339))
	case res.Restored != nil:
		r := res.Restored
		text = fmt.Sprintf("session %s open (%s), restored: %s; pass it as run_code's session_id.", r.Session.ID, r.Session.Language, r.Restored)
		if r.Restored == contract.RestoredReplayed {
			text += fmt.Sprintf(" Its state was rebuilt by running its %d cells again in a new interpreter (this backend keeps no memory): files written by other means, randomness and time may differ.", r.Replayed)
			for _, f := range r.Failed {
				if f.Error != nil {
					text += fmt.Sprintf("\nCell %d failed when replayed: %s: %s", f.Cell, f.Error.Kind, f.Error.Message)
				}
			}
		}
	}
	return textAnswer(res, res.Error, text)
}

func checkpointTool(name, title, desc string, args any) mcp.Tool {
	t := mcp.NewToolWithRawSchema(name, desc, mustJSON(reflectSchema(args)))
	t.Icons = Icons
	t.RawOutputSchema = mustJSON(reflectSchema(&CheckpointResult{}))
	t.Annotations = mcp.ToolAnnotation{Title: title, ReadOnlyHint: mcp.ToBoolPtr(false), DestructiveHint: mcp.ToBoolPtr(false),
		IdempotentHint: mcp.ToBoolPtr(false), OpenWorldHint: mcp.ToBoolPtr(false)}
	return t
}

// CheckpointTools are session_checkpoint, session_restore and
// session_fork, when the runner keeps checkpoints.
func CheckpointTools(d Deps) []server.ServerTool {
	m := d.Manifest
	sr := d.Runner.Sessions()
	if !m.Sessions.Enabled || !m.Checkpoints.Enabled || sr == nil {
		return nil
	}
	keeper, ok := sr.(interface {
		Checkpoints() sandbox.CheckpointRunner
	})
	if !ok || keeper.Checkpoints() == nil {
		return nil
	}
	cr := keeper.Checkpoints()
	c := m.Checkpoints
	how := "This server keeps only the session's cells: a restore or fork runs them again, in order, in a new interpreter, and says so (restored: replayed, with the cells that failed)."
	if m.Backend == "oci" && m.Isolation == "gvisor" {
		how = "This server keeps the interpreter's memory (gVisor): variables, imports, open files and /workspace come back as they were (restored: memory)."
	}
	ckDesc := fmt.Sprintf("Save a session's state as a checkpoint: its id (checkpoint_id) restores it later with session_restore, even after the server restarted. The session pauses briefly and goes on. %s "+
		"At most %d checkpoints per client, each kept %gs.", how, c.MaxPerClient, c.MaxAgeSeconds)
	return []server.ServerTool{
		{Tool: checkpointTool(SessionCheckpointName, "Checkpoint a sandbox session", ckDesc, &SessionIDArgs{}),
			Handler: func(ctx context.Context, req mcp.CallToolRequest) (*mcp.CallToolResult, error) {
				var a SessionIDArgs
				if err := decodeStrict(req, &a); err != nil {
					return checkpointAnswer(CheckpointResult{Error: invalid("bad arguments: %v", err)}), nil
				}
				info, fail := cr.CheckpointSession(ctx, a.SessionID, PrincipalOf(ctx))
				if fail != nil {
					return checkpointAnswer(CheckpointResult{Error: fail}), nil
				}
				return checkpointAnswer(CheckpointResult{Checkpoint: &info}), nil
			}},
		{Tool: checkpointTool(SessionRestoreName, "Restore a sandbox session", "Open a new session from a checkpoint that session_checkpoint returned: it answers as the session did when the checkpoint was taken. "+how, &CheckpointIDArgs{}),
			Handler: func(ctx context.Context, req mcp.CallToolRequest) (*mcp.CallToolResult, error) {
				var a CheckpointIDArgs
				if err := decodeStrict(req, &a); err != nil {
					return checkpointAnswer(CheckpointResult{Error: invalid("bad arguments: %v", err)}), nil
				}
				info, fail := cr.RestoreSession(ctx, a.CheckpointID, PrincipalOf(ctx))
				if fail != nil {
					return checkpointAnswer(CheckpointResult{Error: fail}), nil
				}
				return checkpointAnswer(CheckpointResult{Restored: &info}), nil
			}},
		{Tool: checkpointTool(SessionForkName, "Fork a sandbox session", "Open a new session with the state of an open one, which goes on: try two approaches from one state. The two are separate sandboxes sharing nothing writable. "+how, &SessionIDArgs{}),
			Handler: func(ctx context.Context, req mcp.CallToolRequest) (*mcp.CallToolResult, error) {
				var a SessionIDArgs
				if err := decodeStrict(req, &a); err != nil {
					return checkpointAnswer(CheckpointResult{Error: invalid("bad arguments: %v", err)}), nil
				}
				info, fail := cr.ForkSession(ctx, a.SessionID, PrincipalOf(ctx))
				if fail != nil {
					return checkpointAnswer(CheckpointResult{Error: fail}), nil
				}
				return checkpointAnswer(CheckpointResult{Restored: &info}), nil
			}},
	}
}
