package upstream

import (
	"context"
	"encoding/json"
	"sort"
	"strings"

	"github.com/mark3labs/mcp-go/mcp"
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
			e.Tools = append(e.Tools, toolEntry(t, true))
		}
		out = append(out, e)
	}
	return out
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
	Call         string          `json:"call"`
	Description  string          `json:"description"`
	InputSchema  json.RawMessage `json:"input_schema,omitempty"`
	OutputSchema json.RawMessage `json:"output_schema,omitempty"`
}

// Search finds tools whose server, name or description holds every word
// of query (all tools for an empty one); with schemas, each hit carries
// its full schemas, otherwise a one-line description.
func (s *Set) Search(ctx context.Context, query string, schemas bool) []Match {
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
			e := toolEntry(t, schemas)
			m := Match{Server: srv.Name(), Tool: t.Name, Call: "tools." + Identifier(srv.Name()) + "." + Identifier(t.Name), Description: firstLine(t.Description)}
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
