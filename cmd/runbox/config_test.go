package main

import "testing"

// `runbox config CLIENT` takes its flags before or after the client.
func TestParseConfigFlagsAnywhere(t *testing.T) {
	for _, args := range [][]string{
		{"config", "claude-desktop", "--write", "--file", "/tmp/x.json"},
		{"config", "--write", "claude-desktop", "--file=/tmp/x.json"},
		{"config", "--file", "/tmp/x.json", "claude-desktop", "--write"},
	} {
		cfg, err := parse(args)
		if err != nil {
			t.Fatalf("%v: %v", args, err)
		}
		if c := cfg.client; c.client != "claude-desktop" || !c.write || c.file != "/tmp/x.json" || c.name != "runbox" {
			t.Errorf("%v: %+v", args, c)
		}
	}
	if _, err := parse([]string{"config"}); err == nil {
		t.Error("config without a client was accepted")
	}
	if _, err := parse([]string{"config", "claude-desktop", "vscode"}); err == nil {
		t.Error("config with two clients was accepted")
	}
}

func TestParseSetup(t *testing.T) {
	cfg, err := parse([]string{"setup", "--method", "engine", "--base", "runbox-test/debian:bookworm", "--network", "host"})
	if err != nil {
		t.Fatal(err)
	}
	if s := cfg.setup; s.method != "engine" || s.base != "runbox-test/debian:bookworm" || s.network != "host" || s.image != "runbox/sandbox:bookworm" {
		t.Fatalf("%+v", s)
	}
	if _, err := parse([]string{"setup", "extra"}); err == nil {
		t.Error("setup with an argument was accepted")
	}
}

func TestParseImages(t *testing.T) {
	for _, args := range [][]string{{"images", "build", "--force", "--json"}, {"images", "--force", "build", "--json"}} {
		cfg, err := parse(args)
		if err != nil || !cfg.imagesForce || !cfg.jsonOut {
			t.Errorf("%v: %v %+v", args, err, cfg)
		}
	}
	for _, args := range [][]string{{"images"}, {"images", "list"}, {"images", "build", "extra"}} {
		if _, err := parse(args); err == nil {
			t.Errorf("%v was accepted", args)
		}
	}
}
