package tools

import (
	"context"
	"encoding/json"
	"strings"
	"testing"

	"github.com/mark3labs/mcp-go/mcp"

	"github.com/runbox-mcp/runbox/contract"
	"github.com/runbox-mcp/runbox/manifest"
	"github.com/runbox-mcp/runbox/runs"
	"github.com/runbox-mcp/runbox/runs/runstest"
	"github.com/runbox-mcp/runbox/sandbox"
)

// ckRunner is a runner whose sessions checkpoint: it records who asked
// for what.
type ckRunner struct {
	runstest.NoRunner
	calls []string
}

type ckSessions struct {
	sandbox.SessionRunner
	r *ckRunner
}

func (r *ckRunner) Sessions() sandbox.SessionRunner { return ckSessions{r: r} }

func (s ckSessions) Checkpoints() sandbox.CheckpointRunner { return s.r }

func (r *ckRunner) CheckpointSession(_ context.Context, id, client string) (sandbox.CheckpointInfo, *contract.ErrorInfo) {
	r.calls = append(r.calls, "checkpoint "+id+" "+client)
	return sandbox.CheckpointInfo{ID: "c_1", Keeps: "cells", Cells: 2}, nil
}

func (r *ckRunner) RestoreSession(_ context.Context, id, client string) (sandbox.RestoreInfo, *contract.ErrorInfo) {
	r.calls = append(r.calls, "restore "+id+" "+client)
	return sandbox.RestoreInfo{}, ptr(contract.NoCheckpoint())
}

func (r *ckRunner) ForkSession(_ context.Context, id, client string) (sandbox.RestoreInfo, *contract.ErrorInfo) {
	r.calls = append(r.calls, "fork "+id+" "+client)
	return sandbox.RestoreInfo{Restored: contract.RestoredReplayed, Replayed: 2,
		Failed: []sandbox.ReplayFailed{{Cell: 2, Error: &contract.ErrorInfo{Kind: contract.KindRuntime, Message: "division by zero"}}}}, nil
}

func ptr[T any](v T) *T { return &v }

// TestCheckpointToolSnapshots pins the checkpoint tools' definitions.
func TestCheckpointToolSnapshots(t *testing.T) {
	tools := CheckpointTools(Deps{Service: runs.Service{Manifest: manifest.Default(), Runner: &ckRunner{}}})
	if len(tools) != 3 {
		t.Fatalf("%d tools", len(tools))
	}
	for _, st := range tools {
		snapshot(t, st.Tool)
	}
}

// TestCheckpointTools: each tool passes the caller's name with its
// argument, refuses unknown arguments with invalid_request, and says a
// replay in its text.
func TestCheckpointTools(t *testing.T) {
	r := &ckRunner{}
	byName := map[string]func(context.Context, mcp.CallToolRequest) (*mcp.CallToolResult, error){}
	for _, st := range CheckpointTools(Deps{Service: runs.Service{Manifest: manifest.Default(), Runner: r}}) {
		byName[st.Tool.Name] = st.Handler
	}
	call := func(name, args string) (*mcp.CallToolResult, CheckpointResult) {
		req := mcp.CallToolRequest{}
		req.Params.Name, req.Params.Arguments = name, json.RawMessage(args)
		res, err := byName[name](WithPrincipal(context.Background(), "alice"), req)
		if err != nil {
			t.Fatal(err)
		}
		return res, res.StructuredContent.(CheckpointResult)
	}
	if _, a := call(SessionCheckpointName, `{"session_id":"s_1"}`); a.Error != nil || a.Checkpoint.ID != "c_1" {
		t.Errorf("checkpoint: %+v", a)
	}
	if res, a := call(SessionRestoreName, `{"checkpoint_id":"c_2"}`); !res.IsError || a.Error.Kind != contract.KindCheckpointNotFound {
		t.Errorf("restore: %+v", a)
	}
	res, a := call(SessionForkName, `{"session_id":"s_3"}`)
	if a.Error != nil || a.Restored.Restored != "replayed" {
		t.Errorf("fork: %+v", a)
	}
	if text := res.Content[0].(mcp.TextContent).Text; !strings.Contains(text, "restored: replayed") || !strings.Contains(text, "Cell 2 failed when replayed") {
		t.Errorf("fork's text: %s", text)
	}
	if _, a := call(SessionForkName, `{"session_id":"s_3","extra":1}`); a.Error == nil || a.Error.Kind != contract.KindInvalidRequest {
		t.Errorf("unknown argument: %+v", a)
	}
	want := []string{"checkpoint s_1 alice", "restore c_2 alice", "fork s_3 alice"}
	if len(r.calls) != len(want) {
		t.Fatalf("calls %v", r.calls)
	}
	for i := range want {
		if r.calls[i] != want[i] {
			t.Errorf("call %d: %q, want %q", i, r.calls[i], want[i])
		}
	}
}
