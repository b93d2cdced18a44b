package typings

import (
	"fmt"
	"strings"
)

// Languages a signature is written in.
const (
	Python         = "python"
	TypeScriptLang = "typescript"
	JavaScript     = "javascript"
)

// MaxSignature bounds one signature, in bytes; a longer one is cut to
// its call with unknown types.
const MaxSignature = 4000

// Signature is how code in language calls the tool server.tool (their
// identifiers): Python `tools.s.t(*, a: float, b: float) -> Any`;
// TypeScript and JavaScript `tools.s.t(args: {...}): Promise<unknown>`,
// with definitions written in place (a cycle as unknown).
func Signature(language, serverID, toolID string, m Model) string {
	call := "tools." + serverID + "." + toolID
	var s string
	switch language {
	case TypeScriptLang, JavaScript:
		r := &tsRenderer{names: newNames(), model: m, inline: true, expanded: map[string]bool{}}
		opt := ""
		if !hasRequired(m.Args) {
			opt = "?"
		}
		result := "unknown"
		if m.Result != nil {
			result = r.render(m.Result, "  ", false)
		}
		s = fmt.Sprintf("%s(args%s: %s): Promise<%s>", call, opt, r.render(m.Args, "  ", true), result)
		if len(s) > MaxSignature {
			s = fmt.Sprintf("%s(args%s: Record<string, unknown>): Promise<unknown>", call, opt)
		}
	default:
		s = call + pySignature(m)
		if len(s) > MaxSignature {
			s = call + "(**kwargs) -> Any"
		}
	}
	return s
}

// pySignature is a Python signature: keyword-only parameters, required
// first; names that are not identifiers (or are keywords) as **kwargs.
func pySignature(m Model) string {
	p := &pyRenderer{model: m, expanded: map[string]bool{}}
	var params []string
	kwargs := false
	if m.Args == nil || m.Args.Kind != KindObject {
		kwargs = true
	} else {
		for _, f := range m.Args.Fields {
			if !pyIdent(f.Name) {
				kwargs = true
				continue
			}
			s := f.Name + ": " + p.render(f.Type)
			if !f.Required {
				s += " = None"
			}
			params = append(params, s)
		}
		if m.Args.Extra != nil {
			kwargs = true
		}
	}
	if kwargs {
		params = append(params, "**kwargs")
	} else if len(params) > 0 {
		params = append([]string{"*"}, params...)
	}
	ret := "Any"
	if m.Result != nil {
		ret = p.render(m.Result)
	}
	return "(" + strings.Join(params, ", ") + ") -> " + ret
}

var pyKeywords = map[string]bool{}

func init() {
	for _, w := range strings.Fields(`False None True and as assert async await break class continue def del elif else
		except finally for from global if import in is lambda nonlocal not or pass raise return try while with yield`) {
		pyKeywords[w] = true
	}
}

func pyIdent(s string) bool {
	return s != "" && !pyKeywords[s] && isIdent(s) && !strings.Contains(s, "$")
}

// pyRenderer writes a type as Python reads it; an object with declared
// properties is written {"name": type, "optional"?: type} (a TypedDict
// in the stubs).
type pyRenderer struct {
	model    Model
	expanded map[string]bool
}

func (p *pyRenderer) render(t *Type) string {
	if t == nil {
		return "Any"
	}
	switch t.Kind {
	case KindString:
		return "str"
	case KindNumber:
		return "float"
	case KindInteger:
		return "int"
	case KindBoolean:
		return "bool"
	case KindNull:
		return "None"
	case KindLiteral:
		var vs []string
		for _, v := range t.Values {
			vs = append(vs, pyLiteral(v))
		}
		return "Literal[" + strings.Join(vs, ", ") + "]"
	case KindArray:
		return "list[" + p.render(t.Items) + "]"
	case KindUnion:
		var vs []string
		for _, m := range t.Of {
			vs = append(vs, p.render(m))
		}
		return strings.Join(vs, " | ")
	case KindRef:
		if p.expanded[t.Ref] || p.model.Defs[t.Ref] == nil {
			return "dict"
		}
		p.expanded[t.Ref] = true
		defer delete(p.expanded, t.Ref)
		return p.render(p.model.Defs[t.Ref])
	case KindObject:
		if len(t.Fields) == 0 {
			if t.Extra != nil {
				return "dict[str, " + p.render(t.Extra) + "]"
			}
			return "dict"
		}
		var fs []string
		for _, f := range t.Fields {
			opt := ""
			if !f.Required {
				opt = "?"
			}
			fs = append(fs, quote(f.Name)+opt+": "+p.render(f.Type))
		}
		return "{" + strings.Join(fs, ", ") + "}"
	}
	return "Any"
}

func pyLiteral(v any) string {
	switch v := v.(type) {
	case nil:
		return "None"
	case bool:
		if v {
			return "True"
		}
		return "False"
	}
	return literal(v)
}
