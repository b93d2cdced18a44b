package main

import (
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"

	"github.com/runbox-mcp/runbox/internal/clientconfig"
)

// clientConfig is `runbox config`'s arguments.
type clientConfig struct {
	client string
	write  bool
	file   string
	name   string
}

// runConfig prints, or merges into the client's file, the entry that
// starts this runbox.
func runConfig(cfg config) (int, error) {
	c := clientconfig.Client(cfg.client.client)
	home, _ := os.UserHomeDir()
	file := cfg.client.file
	if file == "" {
		p, err := clientconfig.Path(c, clientconfig.Platform{GOOS: runtime.GOOS, Home: home, Getenv: os.Getenv, Glob: filepath.Glob})
		if err != nil {
			return 2, err
		}
		file = p
	} else if _, err := clientconfig.Path(c, clientconfig.Platform{GOOS: runtime.GOOS}); err != nil {
		return 2, err
	}
	srv, err := serverEntry(cfg)
	if err != nil {
		return 1, err
	}
	if !cfg.client.write {
		os.Stdout.Write(clientconfig.Snippet(c, cfg.client.name, srv))
		fmt.Fprintf(os.Stderr, "runbox: merge this into %s, or run `runbox config %s --write`\n", file, c)
		return 0, nil
	}
	replaced, err := clientconfig.Write(c, file, cfg.client.name, srv)
	if err != nil {
		return 1, err
	}
	verb := "added"
	if replaced {
		verb = "updated"
	}
	fmt.Fprintf(os.Stderr, "runbox: %s %q in %s (%s %v); restart %s to load it\n", verb, cfg.client.name, file, srv.Command, srv.Args, c)
	return 0, nil
}

// serverEntry is the command that starts this binary's MCP server: its
// absolute path, `serve`, the manifest when one was named, and
// DOCKER_HOST when set (MCP clients start servers without the shell's
// environment).
func serverEntry(cfg config) (clientconfig.Server, error) {
	exe, err := executable()
	if err != nil {
		return clientconfig.Server{}, err
	}
	s := clientconfig.Server{Command: exe, Args: []string{"serve"}}
	if cfg.manifestPath != "" {
		abs, err := filepath.Abs(cfg.manifestPath)
		if err != nil {
			return s, err
		}
		if _, err := os.Stat(abs); err != nil {
			return s, fmt.Errorf("--manifest: %w", err)
		}
		s.Args = append(s.Args, "--manifest", abs)
	}
	if h := os.Getenv("DOCKER_HOST"); h != "" {
		s.Env = map[string]string{"DOCKER_HOST": h}
	}
	return s, nil
}

// executable is this binary's absolute path. When it was started through
// PATH (Homebrew's bin, Scoop's shims), that path is kept rather than the
// file it links to, which changes with every upgrade.
func executable() (string, error) {
	exe, err := os.Executable()
	if err != nil {
		return "", fmt.Errorf("cannot tell this binary's path: %w", err)
	}
	if filepath.Base(os.Args[0]) == os.Args[0] {
		if p, err := exec.LookPath(os.Args[0]); err == nil {
			if abs, err := filepath.Abs(p); err == nil && sameFile(abs, exe) {
				return abs, nil
			}
		}
	}
	if !filepath.IsAbs(exe) {
		return "", errors.New("cannot tell this binary's absolute path")
	}
	return exe, nil
}

func sameFile(a, b string) bool {
	sa, err1 := os.Stat(a)
	sb, err2 := os.Stat(b)
	return err1 == nil && err2 == nil && os.SameFile(sa, sb)
}

// clientFiles is where each client reads its servers on this machine.
func clientFiles(c clientconfig.Client) (string, error) {
	home, err := os.UserHomeDir()
	if err != nil {
		return "", err
	}
	return clientconfig.Path(c, clientconfig.Platform{GOOS: runtime.GOOS, Home: home, Getenv: os.Getenv, Glob: filepath.Glob})
}
