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
	"unicode/utf8"

	"github.com/mark3labs/mcp-go/mcp"
	"github.com/mark3labs/mcp-go/server"

	"github.com/runbox-mcp/runbox/audit"
	"github.com/runbox-mcp/runbox/internal/statefile"
	"github.com/runbox-mcp/runbox/manifest"
)

// Saved tools: code a client keeps as a tool of its own. Each tool is a
// directory of its versions (1.json, 2.json, ...) under the store's
// directory; the highest is served. Deleting moves the directory aside
// (.deleted/<name>-<unix>), so no version is lost by accident; the latest
// maxDeletedKept deleted tools are kept, so saving and deleting in a loop
// does not fill the disk.

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
	// Owner is the client (PrincipalOf) that saved the tool's first
	// version: only it may save another version or delete the tool. Empty
	// (a tool saved before owners were kept) reads as LocalPrincipal.
	Owner string `json:"owner,omitempty"`
}

// owner is who may change t.
func (t SavedTool) owner() string {
	if t.Owner == "" {
		return LocalPrincipal
	}
	return t.Owner
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

// Versions are the versions of name kept, oldest first.
func (s *SavedStore) Versions(name string) []int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.versions(name)
}

// Current is the served version of name.
func (s *SavedStore) Current(name string) (SavedTool, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.current(name)
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

// maxSavedFile bounds the read of one saved version: far past what Save
// accepts (code, description and schema are bounded), short of an
// endless file left in the state directory.
const maxSavedFile = 64 << 20

func (s *SavedStore) current(name string) (SavedTool, error) {
	vs := s.versions(name)
	if len(vs) == 0 {
		return SavedTool{}, os.ErrNotExist
	}
	var t SavedTool
	b, err := statefile.Read(filepath.Join(s.dir, name, strconv.Itoa(vs[len(vs)-1])+".json"), maxSavedFile)
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
	if err := os.Rename(filepath.Join(s.dir, name), filepath.Join(aside, fmt.Sprintf("%s-%d", name, time.Now().UnixNano()))); err != nil {
		return false, err
	}
	s.pruneDeleted(aside)
	return true, nil
}

// pruneDeleted keeps the maxDeletedKept latest deleted tools: a client
// that saves and deletes in a loop does not fill the disk.
func (s *SavedStore) pruneDeleted(aside string) {
	entries, err := os.ReadDir(aside)
	if err != nil || len(entries) <= maxDeletedKept {
		return
	}
	at := func(e os.DirEntry) int64 {
		i := strings.LastIndexByte(e.Name(), '-')
		n, _ := strconv.ParseInt(e.Name()[i+1:], 10, 64)
		return n
	}
	slices.SortFunc(entries, func(a, b os.DirEntry) int { return int(min(max(at(a)-at(b), -1), 1)) })
	for _, e := range entries[:len(entries)-maxDeletedKept] {
		_ = os.RemoveAll(filepath.Join(aside, e.Name()))
	}
}

var savedNameRe = regexp.MustCompile(`^[a-z][a-z0-9_]{0,47}$`)

// Bounds on what clients may keep: a client that saves in a loop fills
// neither the disk nor every client's tool list.
const (
	maxSavedTools    = 256
	maxSavedVersions = 100
	maxDeletedKept   = 256
)

// SaveToolArgs are save_tool's arguments.
type SaveToolArgs struct {
	Name        string          `json:"name"`
	Description string          `json:"description"`
	Language    string          `json:"language"`
	Code        string          `json:"code"`
	InputSchema json.RawMessage `json:"input_schema,omitempty"`
}

// validate checks a tool to save against the manifest; the message says
// what to fix. Names reserved for runbox's own tools are the caller's to
// check (reservedName), against what the server serves.
func (a SaveToolArgs) validate(m *manifest.Manifest) (SavedTool, error) {
	t := SavedTool{Name: a.Name, Description: strings.TrimSpace(a.Description), Language: a.Language, Code: a.Code, InputSchema: a.InputSchema}
	switch {
	case !savedNameRe.MatchString(a.Name):
		return t, errors.New("name: lower-case letters, digits and _, starting with a letter, at most 48")
	case t.Description == "" || len(t.Description) > 2048:
		return t, errors.New("description: say what the tool does, in at most 2048 bytes")
	case !plainText(t.Description):
		return t, errors.New("description: UTF-8 text without control or bidirectional-override characters (newlines and tabs are fine)")
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
	if len(t.InputSchema) > maxSchemaBytes || json.Unmarshal(t.InputSchema, &schema) != nil || schema["type"] != "object" {
		return t, errors.New(`input_schema: a JSON Schema object of type "object" (at most 64 KiB)`)
	}
	if err := checkSchema(schema, 0); err != nil {
		return t, fmt.Errorf("input_schema: %v", err)
	}
	return t, nil
}

// Bounds on a saved tool's input schema, which every client that lists
// tools receives: no client should choke on, or fetch anything for, it.
const (
	maxSchemaBytes = 64 << 10
	maxSchemaDepth = 32
)

// checkSchema refuses a schema nested deeper than maxSchemaDepth, and
// references that leave the schema ($ref and its kin other than "#..."),
// which a client could otherwise be sent to fetch.
func checkSchema(v any, depth int) error {
	if depth > maxSchemaDepth {
		return fmt.Errorf("nested deeper than %d levels", maxSchemaDepth)
	}
	switch v := v.(type) {
	case map[string]any:
		for k, e := range v {
			switch k {
			case "$ref", "$dynamicRef", "$recursiveRef":
				if s, ok := e.(string); !ok || !strings.HasPrefix(s, "#") {
					return fmt.Errorf("%s %v: only references inside the schema (\"#...\") are allowed", k, e)
				}
			}
			if err := checkSchema(e, depth+1); err != nil {
				return err
			}
		}
	case []any:
		for _, e := range v {
			if err := checkSchema(e, depth+1); err != nil {
				return err
			}
		}
	}
	return nil
}

// plainText is UTF-8 without control characters (but newline and tab) and
// without the bidirectional overrides that make text read otherwise than
// it is.
func plainText(s string) bool {
	if !utf8.ValidString(s) {
		return false
	}
	for _, r := range s {
		switch {
		case r == '\n' || r == '\t':
		case r < 0x20 || r >= 0x7f && r < 0xa0:
			return false
		case r >= 0x202a && r <= 0x202e || r >= 0x2066 && r <= 0x2069 || r == 0x200e || r == 0x200f || r == 0x061c:
			return false
		}
	}
	return true
}

// savedTool is a saved tool as clients call it: its snippet runs in a
// fresh box with the call's arguments as JSON on stdin and in
// /workspace/input.json, and answers run_code's structured result.
func savedTool(t SavedTool, d Deps) server.ServerTool {
	tool := mcp.NewToolWithRawSchema(t.Name, fmt.Sprintf("%s\n\n(Saved with save_tool by client %q, version %d: %s code run in a fresh runbox sandbox with the arguments as JSON on stdin and in input.json, with the caller's folders and roots; answers run_code's result.)", t.Description, t.owner(), t.Version, t.Language), t.InputSchema)
	tool.RawOutputSchema = OutputSchema()
	tool.Annotations = mcp.ToolAnnotation{Title: t.Name, ReadOnlyHint: mcp.ToBoolPtr(false), DestructiveHint: mcp.ToBoolPtr(false),
		IdempotentHint: mcp.ToBoolPtr(false), OpenWorldHint: mcp.ToBoolPtr(false)}
	return server.ServerTool{Tool: tool, Handler: func(ctx context.Context, req mcp.CallToolRequest) (*mcp.CallToolResult, error) {
		args := objectArguments(req)
		if args[0] != '{' {
			return mcp.NewToolResultError(`invalid_request: the arguments must be a JSON object (input_schema's type is "object")`), nil
		}
		call := Call{Args: RunCodeArgs{Language: t.Language, Code: t.Code, Stdin: string(args),
			Files: []InputFile{{Path: "input.json", Content: string(args)}}}}
		return d.callTool(ctx, req, call), nil
	}}
}

// SavedTools are save_tool, delete_tool and every saved tool, for s: a
// saved or deleted tool is added to or removed from s at once (clients
// hear tools/list_changed). Every tool s serves when SavedTools is called
// is a built-in: call it after every other tool is registered. A saved
// tool never takes a built-in's name (reservedName), nor another saved
// tool's in a second spelling; only the client that saved a tool
// (PrincipalOf) saves its next version or deletes it.
func SavedTools(s *server.MCPServer, store *SavedStore, d Deps) ([]server.ServerTool, error) {
	m := d.Manifest
	saved, err := store.List()
	if err != nil {
		return nil, err
	}
	// The tools this server registered, and runbox's tools that another
	// configuration of it serves (search_tools comes with upstream
	// servers): a tool saved now must not lose its name at a restart.
	reg := &savedRegistry{s: s, served: map[string]bool{}, builtins: []string{RunCodeName, SearchToolsName,
		SessionOpenName, SessionCloseName, SessionListName, SaveToolName, DeleteToolName}}
	for name := range s.ListTools() {
		reg.builtins = append(reg.builtins, name)
	}
	out := []server.ServerTool{}
	for _, t := range saved {
		if why := reg.refuse(t.Name); why != "" {
			if d.Logger != nil {
				d.Logger.Warn("a saved tool is not served", "tool", t.Name, "why", why)
			}
			continue
		}
		reg.served[t.Name] = true
		out = append(out, savedTool(t, d))
	}
	saveSchema, _ := json.Marshal(map[string]any{
		"type":     "object",
		"required": []string{"name", "description", "language", "code"},
		"properties": map[string]any{
			"name":         map[string]any{"type": "string", "description": "The tool's name: lower-case letters, digits and _, starting with a letter, not one of runbox's own tools nor beginning with runbox, run_ or session. Saving a name again makes a new version (only the client that saved it may)."},
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
			if err := decodeStrict(req, &a); err != nil {
				return mcp.NewToolResultError("invalid arguments: " + err.Error()), nil
			}
			t, err := a.validate(m)
			if err != nil {
				return mcp.NewToolResultError("invalid_request: " + err.Error()), nil
			}
			reg.mu.Lock()
			defer reg.mu.Unlock()
			if why := reg.refuse(t.Name); why != "" {
				return mcp.NewToolResultError("invalid_request: name: " + why), nil
			}
			who := PrincipalOf(ctx)
			t.Owner = who
			// The store, not only what this server serves: another server
			// sharing the directory may have saved the name.
			if cur, err := store.Current(t.Name); err == nil {
				if cur.owner() != who {
					return mcp.NewToolResultError(fmt.Sprintf("invalid_request: name: %q was saved by another client: only it may change the tool; choose another name", t.Name)), nil
				}
				t.Owner = cur.Owner
			}
			if n := len(store.Versions(t.Name)); n >= maxSavedVersions {
				return mcp.NewToolResultError(fmt.Sprintf("invalid_request: %q has %d versions, the most kept: delete it and save it again", t.Name, n)), nil
			}
			if !reg.served[t.Name] && len(reg.served) >= maxSavedTools {
				return mcp.NewToolResultError(fmt.Sprintf("invalid_request: %d tools are saved, the most served: delete one first", len(reg.served))), nil
			}
			if t, err = store.Save(t); err != nil {
				return mcp.NewToolResultError("saving failed: " + err.Error()), nil
			}
			reg.served[t.Name] = true
			s.AddTools(savedTool(t, d))
			return structured(map[string]any{"name": t.Name, "version": t.Version, "saved_at": t.SavedAt}), nil
		}},
		server.ServerTool{Tool: del, Handler: func(ctx context.Context, req mcp.CallToolRequest) (*mcp.CallToolResult, error) {
			name := req.GetString("name", "")
			reg.mu.Lock()
			defer reg.mu.Unlock()
			if why := reg.builtin(name); why != "" {
				return mcp.NewToolResultError("invalid_request: " + why + ": it cannot be deleted (only tools saved with save_tool can)"), nil
			}
			if !savedNameRe.MatchString(name) || !reg.served[name] {
				return mcp.NewToolResultError("invalid_request: no saved tool " + strconv.Quote(name)), nil
			}
			if cur, err := store.Current(name); err == nil && cur.owner() != PrincipalOf(ctx) {
				return mcp.NewToolResultError(fmt.Sprintf("invalid_request: %q was saved by another client: only it may delete the tool", name)), nil
			}
			ok, err := store.Delete(name)
			switch {
			case err != nil:
				return mcp.NewToolResultError("deleting failed: " + err.Error()), nil
			case !ok:
				return mcp.NewToolResultError("invalid_request: no saved tool " + strconv.Quote(name)), nil
			}
			delete(reg.served, name)
			s.DeleteTools(name)
			return structured(map[string]any{"name": name, "deleted": true}), nil
		}},
	)
	return out, nil
}

// savedRegistry is what save_tool and delete_tool know of the server's
// tools: the built-ins, and the saved tools they serve. Its lock makes
// each save and delete whole, so two clients saving at once cannot both
// take a name.
type savedRegistry struct {
	s        *server.MCPServer
	mu       sync.Mutex
	builtins []string
	served   map[string]bool
}

// builtin says why name is (in some spelling) a tool runbox serves itself,
// or reserves for one: the built-ins of SavedTools's time, and any tool
// registered since that is not a saved one.
func (r *savedRegistry) builtin(name string) string {
	names := slices.Clone(r.builtins)
	for n := range r.s.ListTools() {
		if !r.served[n] {
			names = append(names, n)
		}
	}
	return reservedName(name, names)
}

// refuse says why name may not be saved (a built-in's, or another saved
// tool's in a second spelling), or "".
func (r *savedRegistry) refuse(name string) string {
	if why := r.builtin(name); why != "" {
		return why
	}
	for n := range r.served {
		if n != name && toolKey(n) == toolKey(name) {
			return fmt.Sprintf("%q is the saved tool %s in another spelling", name, n)
		}
	}
	return ""
}

func structured(v map[string]any) *mcp.CallToolResult {
	b, _ := json.Marshal(v)
	return &mcp.CallToolResult{Content: []mcp.Content{mcp.NewTextContent(string(b))}, StructuredContent: v}
}
