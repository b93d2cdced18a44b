package tools

import (
	"context"
	"log/slog"
	"net/url"
	"os"
	"path/filepath"
	"strconv"
	"strings"

	"github.com/mark3labs/mcp-go/mcp"
	"github.com/mark3labs/mcp-go/server"

	"github.com/runbox-mcp/runbox/manifest"
	"github.com/runbox-mcp/runbox/sandbox"
)

// rootsInput names the roots/list question among a call's input requests.
const rootsInput = "runbox_roots"

// maxRoots bounds how many of a client's roots one box mounts.
const maxRoots = 16

// clientRoots settles which of the client's MCP roots a run_code or
// session_open call mounts, when the manifest allows it: the roots are
// asked for on every call (a multi round-trip input request, which mcp-go
// turns into roots/list for clients of earlier protocol versions), so a
// client's changed roots (notifications/roots/list_changed) count from its
// next call, and one client's roots never reach another's calls. It returns
// the mounts, or the input request to answer first. A client without the
// roots capability gets none.
func clientRoots(ctx context.Context, m *manifest.Manifest, req mcp.CallToolRequest, log *slog.Logger) ([]sandbox.HostMount, *mcp.CallToolResult) {
	if !m.Roots.Mount {
		return nil, nil
	}
	if ans := server.RootsResponse(req.Params.InputResponses, rootsInput); ans != nil {
		return rootMounts(m.Roots, ans.Roots, log), nil
	}
	cs, ok := server.ClientSessionFromContext(ctx).(server.SessionWithClientInfo)
	if !ok || cs.GetClientCapabilities().Roots == nil {
		return nil, nil
	}
	return nil, server.NewInputRequestBuilder("").Roots(rootsInput).ToolResult()
}

// rootMounts are the roots that are folders of this host under one of the
// policy's folders (links resolved first, so a root that is a link cannot
// point outside them), each at /mnt/roots/<name> under a unique, safe name.
func rootMounts(policy manifest.Roots, roots []mcp.Root, log *slog.Logger) []sandbox.HostMount {
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	var out []sandbox.HostMount
	names, sources := map[string]bool{}, map[string]bool{}
	for _, r := range roots {
		dir, why := rootFolder(policy, r.URI)
		if why != "" {
			log.Info("client root not mounted", "uri", r.URI, "why", why)
			continue
		}
		if sources[dir] {
			continue
		}
		if len(out) == maxRoots {
			log.Info("client root not mounted", "uri", r.URI, "why", "more than "+strconv.Itoa(maxRoots)+" roots")
			continue
		}
		base := rootName(r.Name, dir)
		name := base
		for i := 2; names[name]; i++ {
			name = base[:min(len(base), 28)] + "-" + strconv.Itoa(i)
		}
		names[name], sources[dir] = true, true
		out = append(out, sandbox.HostMount{Source: dir, Target: manifest.RootsDir + "/" + name, URI: r.URI})
	}
	return out
}

// rootFolder is the host folder a root's URI names, links resolved, or
// why it is not mounted.
func rootFolder(policy manifest.Roots, uri string) (string, string) {
	u, err := url.Parse(uri)
	if err != nil || u.Scheme != "file" {
		return "", "not a file:// URI"
	}
	if u.Host != "" && u.Host != "localhost" {
		return "", "a file on another host"
	}
	if !filepath.IsAbs(u.Path) {
		return "", "not an absolute path"
	}
	dir, err := filepath.EvalSymlinks(filepath.Clean(u.Path))
	if err != nil {
		return "", "not on this host"
	}
	if st, err := os.Stat(dir); err != nil || !st.IsDir() {
		return "", "not a folder"
	}
	for _, under := range policy.Under {
		if real, err := filepath.EvalSymlinks(under); err == nil {
			under = real
		}
		if rel, err := filepath.Rel(under, dir); err == nil && (rel == "." || filepath.IsLocal(rel)) {
			return dir, ""
		}
	}
	return "", "outside the manifest's roots.under folders"
}

// rootName is a root's folder name in the box: its name, or its folder's
// last element, in lower-case letters, digits, _ and -.
func rootName(name, dir string) string {
	if name == "" {
		name = filepath.Base(dir)
	}
	var b strings.Builder
	for _, c := range strings.ToLower(name) {
		if b.Len() >= 32 {
			break
		}
		switch {
		case c >= 'a' && c <= 'z', c >= '0' && c <= '9', c == '_', c == '-':
			b.WriteRune(c)
		case b.Len() > 0 && !strings.HasSuffix(b.String(), "-"):
			b.WriteByte('-')
		}
	}
	s := strings.Trim(b.String(), "-_")
	if s == "" {
		return "root"
	}
	return s
}

// withInputRequests merges two calls' input requests into one answer, so
// a client answers them in one round trip.
func withInputRequests(a, b *mcp.CallToolResult) *mcp.CallToolResult {
	switch {
	case a == nil:
		return b
	case b == nil:
		return a
	}
	for id, r := range b.InputRequests {
		a.InputRequests[id] = r
	}
	return a
}
