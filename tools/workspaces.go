package tools

import (
	"context"
	"fmt"
	"time"

	"github.com/mark3labs/mcp-go/mcp"
	"github.com/mark3labs/mcp-go/server"

	"github.com/runbox-mcp/runbox/contract"
	"github.com/runbox-mcp/runbox/manifest"
	"github.com/runbox-mcp/runbox/sandbox"
)

// Workspace tools' names.
const (
	WorkspaceListName   = "workspace_list"
	WorkspaceDeleteName = "workspace_delete"
)

// WorkspaceListArgs are workspace_list's (none).
type WorkspaceListArgs struct{}

// WorkspaceDeleteArgs name one workspace.
type WorkspaceDeleteArgs struct {
	Name string `json:"name" jsonschema:"required,description=The workspace to delete with all its files (refused while a session holds it)."`
}

// WorkspaceResult is the structured answer of the workspace tools.
type WorkspaceResult struct {
	Status     contract.Status          `json:"status" jsonschema:"enum=ok,enum=error"`
	Workspaces []contract.WorkspaceInfo `json:"workspaces,omitempty" jsonschema:"description=Your workspaces."`
	Deleted    string                   `json:"deleted,omitempty" jsonschema:"description=The workspace deleted."`
	Error      *contract.ErrorInfo      `json:"error,omitempty"`
}

func workspaceAnswer(res WorkspaceResult) *mcp.CallToolResult {
	res.Status = statusOf(res.Error)
	var text string
	switch {
	case res.Error != nil:
		text = errorText(res.Error)
	case res.Deleted != "":
		text = fmt.Sprintf("workspace %q deleted", res.Deleted)
	default:
		text = fmt.Sprintf("%d workspaces", len(res.Workspaces))
		for _, w := range res.Workspaces {
			use := "free"
			if w.InUse {
				use = "in use"
			}
			text += fmt.Sprintf("\n%s · %s of %s used · %s · last used %s", w.Name, manifest.ByteSize(w.BytesUsed), manifest.ByteSize(w.Quota),
				use, w.LastUsed.UTC().Format(time.RFC3339))
		}
	}
	return textAnswer(res, res.Error, text)
}

func workspaceTool(name, title, desc string, args any, readOnly, destructive bool) mcp.Tool {
	t := sessionTool(name, title, desc, args, readOnly, destructive)
	t.RawOutputSchema = mustJSON(reflectSchema(&WorkspaceResult{}))
	return t
}

// workspaceParagraph is what session_open's description says of named
// workspaces, when the manifest offers them.
func workspaceParagraph(m *manifest.Manifest) string {
	w := m.Workspaces
	if !w.Enabled {
		return ""
	}
	return fmt.Sprintf("\nworkspace: name a persistent workspace (yours alone) to get it as /workspace instead of an empty one: files, pip install --user packages (under /workspace/.local) and npm install's node_modules stay for your next session that names it. "+
		"Each holds %s (a write past it fails with ENOSPC); at most %d per client; one session at a time (a second gets error.kind workspace_busy). workspace_list and workspace_delete manage them.",
		w.Quota, w.MaxPerClient)
}

// WorkspaceTools are workspace_list and workspace_delete, when the
// manifest enables workspaces and the runner keeps them.
func WorkspaceTools(d Deps) []server.ServerTool {
	wr, ok := d.Runner.(sandbox.WorkspaceRunner)
	if !d.Manifest.Workspaces.Enabled || !d.Manifest.Sessions.Enabled || !ok {
		return nil
	}
	list := workspaceTool(WorkspaceListName, "List my workspaces",
		"List your named workspaces (session_open's workspace): name, bytes used, quota, when last used and whether a session holds it now.", &WorkspaceListArgs{}, true, false)
	del := workspaceTool(WorkspaceDeleteName, "Delete a workspace",
		"Delete one of your named workspaces and every file in it; refused (workspace_busy) while a session holds it.", &WorkspaceDeleteArgs{}, false, true)
	return []server.ServerTool{
		{Tool: list, Handler: func(ctx context.Context, req mcp.CallToolRequest) (*mcp.CallToolResult, error) {
			var a WorkspaceListArgs
			if err := decodeStrict(req, &a); err != nil {
				return workspaceAnswer(WorkspaceResult{Error: invalid("bad arguments: %v", err)}), nil
			}
			ws, fail := wr.ListWorkspaces(ctx, PrincipalOf(ctx))
			return workspaceAnswer(WorkspaceResult{Workspaces: ws, Error: fail}), nil
		}},
		{Tool: del, Handler: func(ctx context.Context, req mcp.CallToolRequest) (*mcp.CallToolResult, error) {
			var a WorkspaceDeleteArgs
			if err := decodeStrict(req, &a); err != nil {
				return workspaceAnswer(WorkspaceResult{Error: invalid("bad arguments: %v", err)}), nil
			}
			if fail := wr.DeleteWorkspace(ctx, PrincipalOf(ctx), a.Name); fail != nil {
				return workspaceAnswer(WorkspaceResult{Error: fail}), nil
			}
			return workspaceAnswer(WorkspaceResult{Deleted: a.Name}), nil
		}},
	}
}
