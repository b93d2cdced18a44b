package main

import (
	"fmt"
	"os"
	"time"

	"github.com/mark3labs/mcp-go/client"
	"github.com/runbox-mcp/runbox/manifest"
)

// typeScriptBench measures console.log(1) in TypeScript against
// JavaScript in the same run: a pooled one-off run (the TypeScript box's
// runner started ahead, compiler loaded) and a cell in a live session
// (the compiler warm in the session's Node), taken in turns.
func typeScriptBench(bin string, n int, jsonPath string) error {
	dir, err := os.MkdirTemp("", "runbox-bench-ts-")
	if err != nil {
		return err
	}
	defer os.RemoveAll(dir)
	m := dir + "/pool.yaml"
	if err := os.WriteFile(m, []byte("pool:\n  size: 2\nsessions:\n  max_per_client: 8\n"), 0o644); err != nil {
		return err
	}
	c, err := startRunbox(bin, m)
	if err != nil {
		return err
	}
	defer c.Close()
	time.Sleep(30 * time.Second) // the pool fills and its runners load the compiler
	oneOff := func(lang string) func() error {
		return func() error { return runLanguage(c, lang, "", "console.log(1)\n") }
	}
	// Calls 15 s apart, as an agent that thinks between calls makes them:
	// the pool refills only in a quiet moment, and a TypeScript box's
	// runner takes seconds of a loaded host to load the compiler.
	rows := interleave("console.log(1)", 1, n, 4, 15*time.Second,
		scenario{"javascript, pooled one-off", oneOff("javascript")},
		scenario{"typescript, pooled one-off", oneOff("typescript")})
	var ids []string
	defer func() {
		for _, id := range ids {
			closeSession(c, id)
		}
	}()
	cell := func(lang string) (func() error, error) {
		out, err := tool(c, "session_open", map[string]any{"language": lang})
		if err != nil {
			return nil, err
		}
		s, _ := out["session"].(map[string]any)
		id, _ := s["session_id"].(string)
		if id == "" {
			return nil, fmt.Errorf("session_open answered no id: %v", out)
		}
		ids = append(ids, id)
		return func() error { return runLanguage(c, lang, id, "console.log(1)\n") }, nil
	}
	js, err := cell("javascript")
	if err != nil {
		return err
	}
	tsc, err := cell("typescript")
	if err != nil {
		return err
	}
	rows = append(rows, interleave("console.log(1)", 1, max(n, 30), 4, 0,
		scenario{"javascript, session cell", js},
		scenario{"typescript, session cell", tsc})...)
	if rows[0].Failure == "" && rows[1].Failure == "" && rows[0].P50Ms > 0 {
		fmt.Fprintf(os.Stderr, "bench: TypeScript's pooled one-off is %.2fx JavaScript's (p50 %.0f ms vs %.0f ms); a TypeScript cell p50 %.1f ms\n",
			rows[1].P50Ms/rows[0].P50Ms, rows[1].P50Ms, rows[0].P50Ms, rows[3].P50Ms)
	}
	return report(rows, manifest.DefaultImage, jsonPath)
}

// runLanguage runs code in lang (in session id when set) and wants "1\n".
func runLanguage(c *client.Client, lang, id, code string) error {
	args := map[string]any{"language": lang, "code": code}
	if id != "" {
		args["session_id"] = id
	}
	out, err := tool(c, "run_code", args)
	if err != nil {
		return err
	}
	if s, _ := out["stdout"].(string); s != "1\n" {
		return fmt.Errorf("%s answered stdout %q", lang, s)
	}
	return nil
}
