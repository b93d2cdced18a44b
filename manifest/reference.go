package manifest

import (
	"encoding/json"
	"fmt"
	"slices"
	"strings"
)

// Reference renders the manifest's fields as a markdown table: path, type,
// default and description, from the schema and the defaults, so the
// configuration reference (docs/configuration.md) cannot drift from the code.
func Reference() string {
	var schema map[string]any
	_ = json.Unmarshal(Schema(), &schema)
	defaults := map[string]any{}
	b, _ := json.Marshal(Default())
	_ = json.Unmarshal(b, &defaults)

	var rows []string
	var walk func(prefix string, node map[string]any, def any)
	walk = func(prefix string, node map[string]any, def any) {
		props, _ := node["properties"].(map[string]any)
		names := make([]string, 0, len(props))
		for n := range props {
			names = append(names, n)
		}
		// Keep the order of the Go type (invopop keeps it in "required"
		// only for required fields): sort by the default's key order is
		// unavailable, so sort alphabetically within a level.
		slices.Sort(names)
		for _, n := range names {
			p := props[n].(map[string]any)
			path := prefix + n
			var d any
			if m, ok := def.(map[string]any); ok {
				d = m[n]
			}
			typ := typeOf(p)
			if typ == "object" {
				if _, ok := p["properties"]; !ok {
					// A map (env, headers, hosts, node_selector): one row, its
					// keys are the user's.
					rows = append(rows, fmt.Sprintf("| `%s` | map of %s | %s | %s |", path, valueType(p), renderDefault(d), describe(p)))
					continue
				}
				walk(path+".", p, d)
				continue
			}
			if typ == "array" {
				if items, ok := p["items"].(map[string]any); ok && typeOf(items) == "object" {
					rows = append(rows, fmt.Sprintf("| `%s` | list | %s | %s |", path, renderList(d), describe(p)))
					walk(path+"[].", items, nil)
					continue
				}
			}
			rows = append(rows, fmt.Sprintf("| `%s` | %s | %s | %s |", path, typ, renderDefault(d), describe(p)))
		}
	}
	walk("", schema, defaults)
	return "| field | type | default | meaning |\n| --- | --- | --- | --- |\n" + strings.Join(rows, "\n") + "\n"
}

func typeOf(p map[string]any) string {
	if t, ok := p["type"].(string); ok {
		return t
	}
	if _, ok := p["oneOf"]; ok {
		return "size"
	}
	return "any"
}

// valueType is the type of a map's values.
func valueType(p map[string]any) string {
	if v, ok := p["additionalProperties"].(map[string]any); ok {
		return typeOf(v)
	}
	return "any"
}

// renderList says whether a list of objects has a built-in value (the
// languages) or none; the built-in entries are too long for a cell.
func renderList(d any) string {
	if l, ok := d.([]any); ok && len(l) > 0 {
		return "built-in list"
	}
	return "—"
}

func describe(p map[string]any) string {
	d, _ := p["description"].(string)
	if enum, ok := p["enum"].([]any); ok && len(enum) > 0 && !strings.Contains(d, fmt.Sprint(enum[0])) {
		var vs []string
		for _, e := range enum {
			vs = append(vs, fmt.Sprint(e))
		}
		d += " One of: " + strings.Join(vs, ", ") + "."
	}
	return strings.ReplaceAll(d, "|", "\\|")
}

func renderDefault(d any) string {
	switch v := d.(type) {
	case nil:
		return "—"
	case string:
		if v == "" {
			return "—"
		}
		return "`" + v + "`"
	case float64:
		return fmt.Sprintf("`%g`", v)
	case map[string]any:
		if len(v) == 0 {
			return "—"
		}
	}
	b, _ := json.Marshal(d)
	return "`" + string(b) + "`"
}
