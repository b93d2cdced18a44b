package runs

import (
	"os/exec"
	"strings"
	"testing"
)

const module = "github.com/runbox-mcp/runbox/"

// mcpLayer is runbox's MCP layer: the tools, the server, the prompts.
// mcp-go itself is banned from direct imports only: upstream, which the
// service's runs call through, is an MCP client, and mcp-go's client
// package builds on its server package.
var mcpLayer = []string{module + "tools", module + "internal/mcpserver", module + "prompts"}

const mcpGo = "github.com/mark3labs/mcp-go"

// imports lists what pkgs import (deps: everything they build on, else
// their own imports only), by importer.
func imports(t *testing.T, deps bool, pkgs ...string) map[string][]string {
	t.Helper()
	field := ".Imports"
	if deps {
		field = ".Deps"
	}
	out, err := exec.Command("go", append([]string{"list", "-f", "{{.ImportPath}} {{join " + field + " \" \"}}"}, pkgs...)...).Output()
	if err != nil {
		t.Fatalf("go list %v: %v", pkgs, err)
	}
	got := map[string][]string{}
	for _, line := range strings.Split(strings.TrimSpace(string(out)), "\n") {
		pkg, list, _ := strings.Cut(line, " ")
		got[pkg] = strings.Fields(list)
	}
	return got
}

// banned names the first of list that has one of prefixes ("" for none).
func banned(list []string, prefixes ...string) string {
	for _, p := range list {
		for _, b := range prefixes {
			if p == b || strings.HasPrefix(p, b+"/") {
				return p
			}
		}
	}
	return ""
}

// The run service sits below the MCP layer, and what runs boxes without
// serving MCP uses it without the layer: the service, its registry of runs
// in flight, doctor and the MCP bundle's script build on none of the layer
// and import no mcp-go; cmd/runbox reaches MCP only through
// internal/mcpserver, for serve.
func TestNoMCPLayerBelowIt(t *testing.T) {
	below := []string{".", "./inflight", "../internal/doctor", "../scripts/mcpb"}
	for pkg, deps := range imports(t, true, below...) {
		if p := banned(deps, mcpLayer...); p != "" {
			t.Errorf("%s builds on %s", strings.TrimPrefix(pkg, module), p)
		}
	}
	for pkg, own := range imports(t, false, below...) {
		if p := banned(own, mcpGo); p != "" {
			t.Errorf("%s imports %s", strings.TrimPrefix(pkg, module), p)
		}
	}
	for pkg, own := range imports(t, false, "../cmd/runbox") {
		if p := banned(own, mcpGo, module+"tools", module+"prompts"); p != "" {
			t.Errorf("%s imports %s: only internal/mcpserver serves MCP", strings.TrimPrefix(pkg, module), p)
		}
	}
}

// The checks fail on a violation: internal/mcpserver builds on tools and
// imports mcp-go.
func TestNoMCPLayerCheckBites(t *testing.T) {
	deps, own := imports(t, true, "../internal/mcpserver"), imports(t, false, "../internal/mcpserver")
	if banned(deps[module+"internal/mcpserver"], mcpLayer...) == "" || banned(own[module+"internal/mcpserver"], mcpGo) == "" {
		t.Fatal("internal/mcpserver builds on no MCP layer: the checks would never fail")
	}
}
