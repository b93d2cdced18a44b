package upstream

import (
	"context"
	"encoding/json"
	"fmt"
	"sort"
	"strings"

	"github.com/mark3labs/mcp-go/mcp"

	"github.com/runbox-mcp/runbox/upstream/typings"
)

// CatalogEntry is one server as the code and search_tools see it.
type CatalogEntry struct {
	Name  string      `json:"name"`
	ID    string      `json:"id"`
	Tools []ToolEntry `json:"tools"`
	// Error says why its tools are unknown (not reachable).
	Error string `json:"error,omitempty"`
}

// ToolEntry is one tool: its names, description and schemas.
type ToolEntry struct {
	Name         string          `json:"name"`
	ID           string          `json:"id"`
	Description  string          `json:"description,omitempty"`
	InputSchema  json.RawMessage `json:"input_schema,omitempty"`
	OutputSchema json.RawMessage `json:"output_schema,omitempty"`
	// Types are the arguments' and result's types, read from the schemas:
	// the Python library's typed stubs and checks.
	Types *typings.Model `json:"types,omitempty"`
}

// Catalog lists every server's tools, connecting to those not yet
// connected.
func (s *Set) Catalog(ctx context.Context) []CatalogEntry {
	var out []CatalogEntry
	for _, srv := range s.servers {
		e := CatalogEntry{Name: srv.Name(), ID: Identifier(srv.Name())}
		tools, err := srv.Tools(ctx)
		if err != nil {
			e.Error = err.Error()
		}
		for _, t := range tools {
			te := toolEntry(t, true)
			m := typings.Parse(te.InputSchema, te.OutputSchema)
			te.Types = &m
			e.Tools = append(e.Tools, te)
		}
		out = append(out, e)
	}
	return out
}

// Typings are the declarations of the runbox_tools module in language
// (typings.TypeScriptLang) for the catalog's servers, generated from
// their current tool lists (a tools/list_changed is in the next ones).
func Typings(catalog []CatalogEntry, language string) (string, error) {
	if language != typings.TypeScriptLang {
		return "", fmt.Errorf("no typings in %q: the language is typescript", language)
	}
	var servers []typings.Server
	for _, e := range catalog {
		s := typings.Server{Name: e.Name, ID: e.ID, Error: e.Error}
		for _, t := range e.Tools {
			m := t.Types
			if m == nil {
				p := typings.Parse(t.InputSchema, t.OutputSchema)
				m = &p
			}
			s.Tools = append(s.Tools, typings.Tool{Name: t.Name, ID: t.ID, Description: t.Description, Model: *m})
		}
		servers = append(servers, s)
	}
	return typings.TypeScript(servers), nil
}

func toolEntry(t mcp.Tool, schemas bool) ToolEntry {
	e := ToolEntry{Name: t.Name, ID: Identifier(t.Name), Description: t.Description}
	if schemas {
		if len(t.RawInputSchema) > 0 {
			e.InputSchema = t.RawInputSchema
		} else if b, err := json.Marshal(t.InputSchema); err == nil {
			e.InputSchema = b
		}
		if len(t.RawOutputSchema) > 0 {
			e.OutputSchema = t.RawOutputSchema
		} else if t.OutputSchema.Type != "" {
			e.OutputSchema, _ = json.Marshal(t.OutputSchema)
		}
	}
	return e
}

// Summary is a server's name and tool count, for the run_code description.
type Summary struct {
	Name  string
	Tools int
}

// Summaries are the servers with the tools known so far, without
// connecting.
func (s *Set) Summaries() []Summary {
	var out []Summary
	for _, srv := range s.servers {
		out = append(out, Summary{Name: srv.Name(), Tools: len(srv.Known())})
	}
	return out
}

// Match is a search_tools hit.
type Match struct {
	Server string `json:"server"`
	Tool   string `json:"tool"`
	// Call is how code calls it.
	Call string `json:"call"`
	// Signature is the call with its types, in the language asked for.
	Signature    string          `json:"signature"`
	Description  string          `json:"description"`
	InputSchema  json.RawMessage `json:"input_schema,omitempty"`
	OutputSchema json.RawMessage `json:"output_schema,omitempty"`
}

// Search finds tools whose server, name or description holds every word
// of query (all tools for an empty one); each hit carries its signature in
// language (typings.Python, TypeScriptLang or JavaScript; Python for any
// other) and, with schemas, its full schemas, otherwise a one-line
// description.
func (s *Set) Search(ctx context.Context, query string, schemas bool, language string) []Match {
	words := strings.Fields(strings.ToLower(query))
	var out []Match
	for _, srv := range s.servers {
		tools, _ := srv.Tools(ctx)
		for _, t := range tools {
			hay := strings.ToLower(srv.Name() + " " + t.Name + " " + t.Description)
			ok := true
			for _, w := range words {
				if !strings.Contains(hay, w) {
					ok = false
					break
				}
			}
			if !ok {
				continue
			}
			e := toolEntry(t, true)
			sid, tid := Identifier(srv.Name()), Identifier(t.Name)
			m := Match{Server: srv.Name(), Tool: t.Name, Call: "tools." + sid + "." + tid, Description: firstLine(t.Description),
				Signature: typings.Signature(language, sid, tid, typings.Parse(e.InputSchema, e.OutputSchema))}
			if schemas {
				m.Description, m.InputSchema, m.OutputSchema = t.Description, e.InputSchema, e.OutputSchema
			}
			out = append(out, m)
		}
	}
	sort.SliceStable(out, func(i, j int) bool { return out[i].Server < out[j].Server })
	return out
}

func firstLine(s string) string {
	s = strings.TrimSpace(s)
	if i := strings.IndexAny(s, "\n"); i >= 0 {
		s = s[:i]
	}
	if len(s) > 160 {
		s = s[:157] + "..."
	}
	return s
}
