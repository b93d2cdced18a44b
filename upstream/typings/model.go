package typings

import (
	"bytes"
	"encoding/json"
	"sort"
	"strings"
	"unicode/utf8"
)

// Kinds of Type.
const (
	KindUnknown = "unknown"
	KindString  = "string"
	KindNumber  = "number"
	KindInteger = "integer"
	KindBoolean = "boolean"
	KindNull    = "null"
	KindArray   = "array"
	KindObject  = "object"
	KindUnion   = "union"
	KindLiteral = "literal"
	KindRef     = "ref"
)

// Bounds of one tool's model: an upstream schema is untrusted.
const (
	// MaxDepth is how deep a schema is read; deeper is unknown.
	MaxDepth = 16
	// MaxNodes is how many types one tool's model holds; past it, the
	// rest is unknown.
	MaxNodes = 2000
	// MaxEnum is the most literal values kept; a larger enum is its
	// values' JSON type.
	MaxEnum = 256
	// MaxDefs is the most $ref targets one tool's model names.
	MaxDefs = 64
	// MaxDoc is the longest description kept, in bytes.
	MaxDoc = 2000
	// MaxName is the longest property name kept; a property with a
	// longer name is left out (the object stays open to it).
	MaxName = 256
	// MaxSchema is the largest schema read, in bytes; a larger one is
	// unknown arguments.
	MaxSchema = 1 << 20
)

// Type is a JSON value's type as the bindings say it.
type Type struct {
	Kind string `json:"kind"`
	// Items is an array's element type.
	Items *Type `json:"items,omitempty"`
	// Fields are an object's declared properties, in the schema's order
	// of required first, then by name.
	Fields []Field `json:"fields,omitempty"`
	// Extra is the type of an object's other properties
	// (additionalProperties); nil: none declared.
	Extra *Type `json:"extra,omitempty"`
	// Closed says additionalProperties is false.
	Closed bool `json:"closed,omitempty"`
	// Of are a union's members.
	Of []*Type `json:"of,omitempty"`
	// Values are a literal union's values: strings, json.Numbers,
	// booleans, nil.
	Values []any `json:"values,omitempty"`
	// Ref names a definition of the tool's model (Signature.Defs).
	Ref string `json:"ref,omitempty"`
}

// Field is one property of an object.
type Field struct {
	Name     string `json:"name"`
	Type     *Type  `json:"type"`
	Required bool   `json:"required,omitempty"`
	Doc      string `json:"doc,omitempty"`
}

// Model is one tool's arguments and result.
type Model struct {
	// Args is an object (unknown for an unreadable schema).
	Args *Type `json:"args"`
	// Result is the structured result's type; nil when the tool declares
	// no output schema.
	Result *Type `json:"result,omitempty"`
	// Defs are the $ref targets, by name.
	Defs map[string]*Type `json:"defs,omitempty"`
}

var unknown = func() *Type { return &Type{Kind: KindUnknown} }

// Parse reads a tool's input and output schemas (either may be empty).
func Parse(input, output json.RawMessage) Model {
	p := &parser{defs: map[string]*Type{}}
	m := Model{Args: p.root(input, true)}
	if len(bytes.TrimSpace(output)) > 0 && string(bytes.TrimSpace(output)) != "null" {
		m.Result = p.root(output, false)
	}
	if len(p.defs) > 0 {
		m.Defs = p.defs
		breakAliasCycles(m.Defs)
	}
	return m
}

// breakAliasCycles makes unknown each definition that is itself again
// through unions and $refs alone (A is B, B is A or null): no value has
// such a type, and TypeScript refuses the alias. A cycle through an
// object or array is a recursive type, and kept.
func breakAliasCycles(defs map[string]*Type) {
	keys := make([]string, 0, len(defs))
	for k := range defs {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	for _, k := range keys {
		seen := map[string]bool{}
		var reaches func(t *Type) bool
		reaches = func(t *Type) bool {
			switch {
			case t == nil:
			case t.Kind == KindUnion:
				for _, m := range t.Of {
					if reaches(m) {
						return true
					}
				}
			case t.Kind == KindRef:
				if t.Ref == k {
					return true
				}
				if !seen[t.Ref] {
					seen[t.Ref] = true
					return reaches(defs[t.Ref])
				}
			}
			return false
		}
		if reaches(defs[k]) {
			defs[k] = unknown()
		}
	}
}

type parser struct {
	nodes int
	defs  map[string]*Type
	// doc is the schema's definitions section being read, for $refs.
	doc map[string]any
	// prefix tells one schema's definitions from the other's (input,
	// output) in Defs.
	prefix string
}

func (p *parser) root(raw json.RawMessage, args bool) *Type {
	p.prefix = "Result"
	if args {
		p.prefix = ""
	}
	empty := &Type{Kind: KindObject}
	if len(raw) == 0 && args {
		return empty
	}
	if len(raw) > MaxSchema {
		return unknown()
	}
	d := json.NewDecoder(bytes.NewReader(raw))
	d.UseNumber()
	var v any
	if d.Decode(&v) != nil {
		return unknown()
	}
	m, _ := v.(map[string]any)
	p.doc = m
	t := p.read(v, 0)
	if args && t.Kind == KindObject && t.Extra == nil && len(t.Fields) == 0 && !t.Closed {
		// An argument object that declares nothing takes nothing.
		return empty
	}
	return t
}

// read is the type of a schema node.
func (p *parser) read(v any, depth int) *Type {
	p.nodes++
	if p.nodes > MaxNodes || depth > MaxDepth {
		return unknown()
	}
	s, ok := v.(map[string]any)
	if !ok {
		// true, false (never valid, but unknown is never wrong) or junk.
		return unknown()
	}
	if ref, ok := s["$ref"].(string); ok {
		return p.ref(ref, depth)
	}
	if c, ok := s["const"]; ok {
		if primitive(c) {
			return &Type{Kind: KindLiteral, Values: []any{c}}
		}
		return unknown()
	}
	if e, ok := s["enum"].([]any); ok && len(e) > 0 {
		if t := literals(e); t != nil {
			return nullable(s, t)
		}
	}
	for _, k := range []string{"anyOf", "oneOf"} {
		if alts, ok := s[k].([]any); ok && len(alts) > 0 {
			var of []*Type
			for _, a := range alts {
				of = append(of, p.read(a, depth+1))
			}
			return nullable(s, union(of))
		}
	}
	if all, ok := s["allOf"].([]any); ok {
		if len(all) == 1 {
			return p.read(all[0], depth+1)
		}
		return unknown()
	}
	switch t := s["type"].(type) {
	case string:
		return nullable(s, p.typed(s, t, depth))
	case []any:
		var of []*Type
		for _, x := range t {
			name, _ := x.(string)
			of = append(of, p.typed(s, name, depth))
		}
		return nullable(s, union(of))
	}
	if _, ok := s["properties"]; ok {
		return nullable(s, p.typed(s, KindObject, depth))
	}
	if _, ok := s["items"]; ok {
		return nullable(s, p.typed(s, KindArray, depth))
	}
	return unknown()
}

// typed is the type of a node of one JSON type.
func (p *parser) typed(s map[string]any, name string, depth int) *Type {
	switch name {
	case KindString, KindNumber, KindInteger, KindBoolean, KindNull:
		return &Type{Kind: name}
	case KindArray:
		items, ok := s["items"].(map[string]any)
		if !ok {
			// No items, or a tuple (items as a list): any elements.
			return &Type{Kind: KindArray, Items: unknown()}
		}
		return &Type{Kind: KindArray, Items: p.read(items, depth+1)}
	case KindObject:
		return p.object(s, depth)
	}
	return unknown()
}

func (p *parser) object(s map[string]any, depth int) *Type {
	t := &Type{Kind: KindObject}
	props, _ := s["properties"].(map[string]any)
	required := map[string]bool{}
	if r, ok := s["required"].([]any); ok {
		for _, n := range r {
			if n, ok := n.(string); ok {
				required[n] = true
			}
		}
	}
	names := make([]string, 0, len(props))
	for n := range props {
		names = append(names, n)
	}
	sort.Slice(names, func(i, j int) bool {
		if required[names[i]] != required[names[j]] {
			return required[names[i]]
		}
		return names[i] < names[j]
	})
	long := false
	for _, n := range names {
		if len(n) > MaxName || !utf8.ValidString(n) {
			long = true
			continue
		}
		ps, _ := props[n].(map[string]any)
		t.Fields = append(t.Fields, Field{Name: n, Type: p.read(props[n], depth+1), Required: required[n], Doc: doc(ps)})
	}
	switch a := s["additionalProperties"].(type) {
	case bool:
		t.Closed = !a
		if a {
			t.Extra = unknown()
		}
	case map[string]any:
		t.Extra = p.read(a, depth+1)
	}
	if long && t.Extra == nil {
		// A property left out is still allowed: the object is open to it.
		t.Closed, t.Extra = false, unknown()
	}
	return t
}

// ref is the type a $ref names: a definition of the same schema, named
// once; anything else is unknown.
func (p *parser) ref(ref string, depth int) *Type {
	var section, name string
	for _, sec := range []string{"$defs", "definitions"} {
		if rest, ok := strings.CutPrefix(ref, "#/"+sec+"/"); ok && !strings.Contains(rest, "/") {
			section, name = sec, strings.NewReplacer("~1", "/", "~0", "~").Replace(rest)
		}
	}
	defs, _ := p.doc[section].(map[string]any)
	target, ok := defs[name]
	if section == "" || !ok || len(name) > MaxName || !utf8.ValidString(name) {
		return unknown()
	}
	key := p.prefix + name
	if _, seen := p.defs[key]; !seen {
		if len(p.defs) >= MaxDefs {
			return unknown()
		}
		// Registered before it is read, so a cycle ends at its name.
		p.defs[key] = unknown()
		p.defs[key] = p.read(target, depth+1)
	}
	return &Type{Kind: KindRef, Ref: key}
}

func primitive(v any) bool {
	switch v.(type) {
	case nil, string, bool, json.Number:
		return true
	}
	return false
}

// literals is an enum's type: its values, or, past MaxEnum or with
// values that are not primitives, nil (the node's type says it).
func literals(e []any) *Type {
	if len(e) > MaxEnum {
		return nil
	}
	for _, v := range e {
		if !primitive(v) {
			return nil
		}
	}
	return &Type{Kind: KindLiteral, Values: e}
}

// nullable adds null to t for OpenAPI's nullable: true.
func nullable(s map[string]any, t *Type) *Type {
	if n, _ := s["nullable"].(bool); n {
		return union([]*Type{t, {Kind: KindNull}})
	}
	return t
}

// union is the union of of, flattened; unknown when a member is.
func union(of []*Type) *Type {
	var flat []*Type
	seen := map[string]bool{}
	for _, t := range of {
		members := []*Type{t}
		if t.Kind == KindUnion {
			members = t.Of
		}
		for _, m := range members {
			if m.Kind == KindUnknown {
				return unknown()
			}
			key := m.Kind
			if m.Kind != KindString && m.Kind != KindNumber && m.Kind != KindInteger && m.Kind != KindBoolean && m.Kind != KindNull {
				b, _ := json.Marshal(m)
				key = string(b)
			}
			if !seen[key] {
				seen[key] = true
				flat = append(flat, m)
			}
		}
	}
	switch len(flat) {
	case 0:
		return unknown()
	case 1:
		return flat[0]
	}
	return &Type{Kind: KindUnion, Of: flat}
}

// doc is a schema node's description (else its title), bounded.
func doc(s map[string]any) string {
	d, _ := s["description"].(string)
	if d == "" {
		d, _ = s["title"].(string)
	}
	return Bound(d, MaxDoc)
}

// Bound cuts s to n bytes on a rune boundary, valid UTF-8, trimmed.
func Bound(s string, n int) string {
	s = strings.TrimSpace(strings.ToValidUTF8(s, "\uFFFD"))
	if len(s) <= n {
		return s
	}
	i := n
	for i > 0 && !utf8.RuneStart(s[i]) {
		i--
	}
	return s[:i] + "…"
}
