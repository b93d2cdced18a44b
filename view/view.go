package view

import (
	"crypto/sha256"
	_ "embed"
	"encoding/base64"
	"strings"
)

// URI is the view's resource, the one every run-drawing tool points to.
const URI = "ui://runbox/run"

// MIMEType marks an HTML resource as an MCP App.
const MIMEType = "text/html;profile=mcp-app"

// Extension is the MCP Apps extension's id in client capabilities.
const Extension = "io.modelcontextprotocol/ui"

//go:embed run.html
var page string

// cspMark is where the page's policy goes.
const cspMark = "<!--csp-->"

var html = build(page)

// HTML is the page, its policy inlined.
func HTML() string { return html }

// CSP is the page's policy. The page's one script runs by its hash;
// nothing is fetched from anywhere: images come as data: or blob: URLs
// the page makes from what the host hands it, and nested frames are
// srcdoc documents, which inherit this policy.
func CSP() string { return csp(page) }

func csp(p string) string {
	return strings.Join([]string{
		"default-src 'none'",
		"script-src '" + hash(between(p, "<script>", "</script>")) + "'",
		"style-src 'unsafe-inline'",
		"img-src data: blob:",
		"media-src 'none'",
		"font-src 'none'",
		"connect-src 'none'",
		"frame-src 'none'",
		"child-src 'none'",
		"worker-src 'none'",
		"object-src 'none'",
		"base-uri 'none'",
		"form-action 'none'",
	}, "; ")
}

func build(p string) string {
	meta := `<meta http-equiv="Content-Security-Policy" content="` + csp(p) + `">`
	return strings.Replace(p, cspMark, meta, 1)
}

// between is the text of the first element opened by open and closed by
// close: the page has exactly one inline script.
func between(p, open, close string) string {
	i := strings.Index(p, open)
	if i < 0 {
		return ""
	}
	rest := p[i+len(open):]
	j := strings.Index(rest, close)
	if j < 0 {
		return ""
	}
	return rest[:j]
}

func hash(s string) string {
	sum := sha256.Sum256([]byte(s))
	return "sha256-" + base64.StdEncoding.EncodeToString(sum[:])
}

// ResourceMeta is the view resource's _meta.ui: no network domain of any
// kind, and a border around it.
func ResourceMeta() map[string]any {
	return map[string]any{
		"csp": map[string]any{
			"connectDomains":  []string{},
			"resourceDomains": []string{},
			"frameDomains":    []string{},
			"baseUriDomains":  []string{},
		},
		"prefersBorder": true,
	}
}
