package tools

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/mark3labs/mcp-go/mcp"
	"github.com/mark3labs/mcp-go/server"

	"github.com/runbox-mcp/runbox/audit"
	"github.com/runbox-mcp/runbox/manifest"
)

// Saved tools: code a client keeps as a tool of its own. Each tool is a
// directory of its versions (1.json, 2.json, ...) under the store's
// directory; the highest is served. Deleting moves the directory aside
// (.deleted/<name>-<unix>), so no version is lost by accident.

// SaveToolName and DeleteToolName are the tools' names.
const (
	SaveToolName   = "save_tool"
	DeleteToolName = "delete_tool"
)

// SavedTool is one version of a saved tool.
type SavedTool struct {
	Name        string          `json:"name"`
	Description string          `json:"description"`
	Language    string          `json:"language"`
	Code        string          `json:"code"`
	InputSchema json.RawMessage `json:"input_schema"`
	Version     int             `json:"version"`
	SavedAt     time.Time       `json:"saved_at"`
}

// SavedStore keeps saved tools in a directory.
type SavedStore struct {
	dir string
	mu  sync.Mutex
}

// DefaultSavedDir is where saved tools go when the manifest names no dir.
func DefaultSavedDir() string {
	return filepath.Join(audit.StateDir(), "tools")
}

// NewSavedStore opens (creating) the store of m.
func NewSavedStore(s manifest.SavedTools) (*SavedStore, error) {
	dir := s.Dir
	if dir == "" {
		dir = DefaultSavedDir()
	}
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return nil, fmt.Errorf("saved tools: %w", err)
	}
	return &SavedStore{dir: dir}, nil
}

// List returns the current version of every saved tool, by name.
func (s *SavedStore) List() ([]SavedTool, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	entries, err := os.ReadDir(s.dir)
	if err != nil {
		return nil, err
	}
	var out []SavedTool
	for _, e := range entries {
		if !e.IsDir() || !savedNameRe.MatchString(e.Name()) {
			continue
		}
		if t, err := s.current(e.Name()); err == nil {
			out = append(out, t)
		}
	}
	return out, nil
}

func (s *SavedStore) versions(name string) []int {
	entries, _ := os.ReadDir(filepath.Join(s.dir, name))
	var vs []int
	for _, e := range entries {
		if v, err := strconv.Atoi(strings.TrimSuffix(e.Name(), ".json")); err == nil && strings.HasSuffix(e.Name(), ".json") {
			vs = append(vs, v)
		}
	}
	slices.Sort(vs)
	return vs
}

func (s *SavedStore) current(name string) (SavedTool, error) {
	vs := s.versions(name)
	if len(vs) == 0 {
		return SavedTool{}, os.ErrNotExist
	}
	var t SavedTool
	b, err := os.ReadFile(filepath.Join(s.dir, name, strconv.Itoa(vs[len(vs)-1])+".json"))
	if err == nil {
		err = json.Unmarshal(b, &t)
	}
	return t, err
}

// Save stores t as the next version of its name and returns it.
func (s *SavedStore) Save(t SavedTool) (SavedTool, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	dir := filepath.Join(s.dir, t.Name)
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return t, err
	}
	vs := s.versions(t.Name)
	t.Version = 1
	if len(vs) > 0 {
		t.Version = vs[len(vs)-1] + 1
	}
	t.SavedAt = time.Now().UTC()
	b, _ := json.MarshalIndent(t, "", "  ")
	tmp := filepath.Join(dir, ".tmp-"+strconv.Itoa(t.Version))
	if err := os.WriteFile(tmp, b, 0o600); err != nil {
		return t, err
	}
	return t, os.Rename(tmp, filepath.Join(dir, strconv.Itoa(t.Version)+".json"))
}

// Delete moves a tool's versions aside; false when there was none.
func (s *SavedStore) Delete(name string) (bool, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if len(s.versions(name)) == 0 {
		return false, nil
	}
	aside := filepath.Join(s.dir, ".deleted")
	if err := os.MkdirAll(aside, 0o700); err != nil {
		return false, err
	}
	return true, os.Rename(filepath.Join(s.dir, name), filepath.Join(aside, fmt.Sprintf("%s-%d", name, time.Now().UnixNano())))
}

var savedNameRe = regexp.MustCompile(`^[a-z][a-z0-9_]{0,47}$`)

// reserved are names a saved tool may not take.
var reserved = []string{RunCodeName, SearchToolsName, SaveToolName, DeleteToolName}

// SaveToolArgs are save_tool's arguments.
type SaveToolArgs struct {
	Name        string          `json:"name"`
	Description string          `json:"description"`
	Language    string          `json:"language"`
	Code        string          `json:"code"`
	InputSchema json.RawMessage `json:"input_schema,omitempty"`
}

// validate checks a tool to save against the manifest; the message says
// what to fix.
func (a SaveToolArgs) validate(m *manifest.Manifest) (SavedTool, error) {
	t := SavedTool{Name: a.Name, Description: strings.TrimSpace(a.Description), Language: a.Language, Code: a.Code, InputSchema: a.InputSchema}
	switch {
	case !savedNameRe.MatchString(a.Name):
		return t, errors.New("name: lower-case letters, digits and _, starting with a letter, at most 48")
	case slices.Contains(reserved, a.Name):
		return t, fmt.Errorf("name: %q is one of runbox's own tools", a.Name)
	case t.Description == "" || len(t.Description) > 2048:
		return t, errors.New("description: say what the tool does, in at most 2048 bytes")
	case strings.TrimSpace(a.Code) == "" || len(a.Code) > int(m.Limits.CodeBytes) || strings.ContainsRune(a.Code, 0):
		return t, fmt.Errorf("code: a program of at most %s without NUL bytes", m.Limits.CodeBytes)
	}
	if _, ok := m.Language(a.Language); !ok {
		return t, fmt.Errorf("language: one of %s", strings.Join(m.LanguageNames(), ", "))
	}
	if len(t.InputSchema) == 0 || string(t.InputSchema) == "null" {
		t.InputSchema = json.RawMessage(`{"type":"object"}`)
	}
	var schema map[string]any
	if len(t.InputSchema) > 64<<10 || json.Unmarshal(t.InputSchema, &schema) != nil || schema["type"] != "object" {
		return t, errors.New(`input_schema: a JSON Schema object of type "object" (at most 64 KiB)`)
	}
	return t, nil
}

// savedTool is a saved tool as clients call it: its snippet runs in a
// fresh box with the call's arguments as JSON on stdin and in
// /workspace/input.json, and answers run_code's structured result.
func savedTool(t SavedTool, run server.ToolHandlerFunc) server.ServerTool {
	tool := mcp.NewToolWithRawSchema(t.Name, fmt.Sprintf("%s\n\n(Saved with save_tool, version %d: %s code run in a fresh runbox sandbox with the arguments as JSON on stdin and in input.json; answers run_code's result.)", t.Description, t.Version, t.Language), t.InputSchema)
	tool.RawOutputSchema = OutputSchema()
	tool.Annotations = mcp.ToolAnnotation{Title: t.Name, ReadOnlyHint: mcp.ToBoolPtr(false), DestructiveHint: mcp.ToBoolPtr(false),
		IdempotentHint: mcp.ToBoolPtr(false), OpenWorldHint: mcp.ToBoolPtr(false)}
	return server.ServerTool{Tool: tool, Handler: func(ctx context.Context, req mcp.CallToolRequest) (*mcp.CallToolResult, error) {
		args, err := json.Marshal(req.GetRawArguments())
		if err != nil || string(args) == "null" {
			args = []byte("{}")
		}
		rc := mcp.CallToolRequest{}
		rc.Params.Name = RunCodeName
		rc.Params.Arguments = map[string]any{"language": t.Language, "code": t.Code, "stdin": string(args),
			"files": []map[string]any{{"path": "input.json", "content": string(args)}}}
		return run(ctx, rc)
	}}
}

// SavedTools are save_tool, delete_tool and every saved tool, for s: a
// saved or deleted tool is added to or removed from s at once (clients
// hear tools/list_changed).
func SavedTools(s *server.MCPServer, store *SavedStore, d Deps) ([]server.ServerTool, error) {
	m := d.Manifest
	run := RunCode(d).Handler
	saved, err := store.List()
	if err != nil {
		return nil, err
	}
	out := []server.ServerTool{}
	for _, t := range saved {
		out = append(out, savedTool(t, run))
	}
	saveSchema, _ := json.Marshal(map[string]any{
		"type":     "object",
		"required": []string{"name", "description", "language", "code"},
		"properties": map[string]any{
			"name":         map[string]any{"type": "string", "description": "The tool's name: lower-case letters, digits and _, starting with a letter. Saving a name again makes a new version."},
			"description":  map[string]any{"type": "string", "description": "What the tool does, for the agents that will call it."},
			"language":     map[string]any{"type": "string", "enum": m.LanguageNames()},
			"code":         map[string]any{"type": "string", "description": "The program. It reads the call's arguments as JSON from stdin (or /workspace/input.json) and prints its answer."},
			"input_schema": map[string]any{"type": "object", "description": `The JSON Schema of the tool's arguments (type "object"); default: any object.`},
		},
		"additionalProperties": false,
	})
	save := mcp.NewToolWithRawSchema(SaveToolName, "Save code as a new tool that agents can call by name: it runs in a fresh sandbox with the call's arguments as JSON on stdin and in /workspace/input.json, and answers like run_code. Saving an existing name makes a new version. Saved tools survive a restart.", saveSchema)
	save.Annotations = mcp.ToolAnnotation{Title: "Save code as a tool", ReadOnlyHint: mcp.ToBoolPtr(false), DestructiveHint: mcp.ToBoolPtr(false),
		IdempotentHint: mcp.ToBoolPtr(false), OpenWorldHint: mcp.ToBoolPtr(false)}
	delSchema, _ := json.Marshal(map[string]any{"type": "object", "required": []string{"name"},
		"properties": map[string]any{"name": map[string]any{"type": "string", "description": "The saved tool to delete."}}, "additionalProperties": false})
	del := mcp.NewToolWithRawSchema(DeleteToolName, "Delete a tool saved with save_tool.", delSchema)
	del.Annotations = mcp.ToolAnnotation{Title: "Delete a saved tool", ReadOnlyHint: mcp.ToBoolPtr(false), DestructiveHint: mcp.ToBoolPtr(true),
		IdempotentHint: mcp.ToBoolPtr(true), OpenWorldHint: mcp.ToBoolPtr(false)}
	out = append(out,
		server.ServerTool{Tool: save, Handler: func(ctx context.Context, req mcp.CallToolRequest) (*mcp.CallToolResult, error) {
			var a SaveToolArgs
			raw, _ := json.Marshal(req.GetRawArguments())
			dec := json.NewDecoder(strings.NewReader(string(raw)))
			dec.DisallowUnknownFields()
			if err := dec.Decode(&a); err != nil {
				return mcp.NewToolResultError("invalid arguments: " + err.Error()), nil
			}
			t, err := a.validate(m)
			if err != nil {
				return mcp.NewToolResultError("invalid_request: " + err.Error()), nil
			}
			if t, err = store.Save(t); err != nil {
				return mcp.NewToolResultError("saving failed: " + err.Error()), nil
			}
			s.AddTools(savedTool(t, run))
			return structured(map[string]any{"name": t.Name, "version": t.Version, "saved_at": t.SavedAt}), nil
		}},
		server.ServerTool{Tool: del, Handler: func(ctx context.Context, req mcp.CallToolRequest) (*mcp.CallToolResult, error) {
			name := req.GetString("name", "")
			if !savedNameRe.MatchString(name) {
				return mcp.NewToolResultError("invalid_request: no saved tool " + strconv.Quote(name)), nil
			}
			ok, err := store.Delete(name)
			switch {
			case err != nil:
				return mcp.NewToolResultError("deleting failed: " + err.Error()), nil
			case !ok:
				return mcp.NewToolResultError("invalid_request: no saved tool " + strconv.Quote(name)), nil
			}
			s.DeleteTools(name)
			return structured(map[string]any{"name": name, "deleted": true}), nil
		}},
	)
	return out, nil
}

func structured(v map[string]any) *mcp.CallToolResult {
	b, _ := json.Marshal(v)
	return &mcp.CallToolResult{Content: []mcp.Content{mcp.NewTextContent(string(b))}, StructuredContent: v}
}
