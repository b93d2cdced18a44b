package main

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"os"
	"text/tabwriter"
	"time"

	"github.com/runbox-mcp/runbox/contract"

	"github.com/runbox-mcp/runbox/audit"
	"github.com/runbox-mcp/runbox/manifest"
	"github.com/runbox-mcp/runbox/runs"
	"github.com/runbox-mcp/runbox/sandbox"
)

// cliDeps are the run_code pipeline's for runs started from the command
// line: no budgets, metrics or upstream servers; the audit log, when it
// opens (one that does not is said on stderr, not fatal), until done.
func cliDeps(m *manifest.Manifest, r sandbox.Runner, transport string, logger *slog.Logger) (d runs.Service, done func()) {
	l, err := audit.Open(m.Audit)
	if err != nil {
		fmt.Fprintln(os.Stderr, "runbox: audit log:", err)
	}
	return runs.Service{Manifest: m, Runner: r, Audit: l, Transport: transport, Logger: logger}, func() { _ = l.Close() }
}

// cliCall is c made by runbox itself, as the audit log names it.
func cliCall(c runs.Call) runs.Call {
	c.App = audit.Client{Name: "runbox", Version: version}
	return c
}

func readAudit(m *manifest.Manifest) ([]audit.Entry, error) {
	return audit.Read(audit.PathOf(m.Audit), m.Audit.Keep)
}

// listRuns prints the latest runs of the audit log, newest last.
func listRuns(cfg config, m *manifest.Manifest) (int, error) {
	entries, err := readAudit(m)
	if err != nil {
		return 1, err
	}
	if cfg.limit > 0 && len(entries) > cfg.limit {
		entries = entries[len(entries)-cfg.limit:]
	}
	if cfg.jsonOut {
		enc := json.NewEncoder(os.Stdout)
		for _, e := range entries {
			if err := enc.Encode(e); err != nil {
				return 1, err
			}
		}
		return 0, nil
	}
	tw := tabwriter.NewWriter(os.Stdout, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "TIME\tRUN ID\tCLIENT\tLANGUAGE\tRESULT\tWALL\tBACKGROUND\tCODE\tREPLAY")
	for _, e := range entries {
		result := string(e.Status)
		if e.Error != nil {
			result = string(e.Error.Kind)
			if e.Error.Limit != "" {
				result += "/" + string(e.Error.Limit)
			}
		}
		client := e.Client.Name
		if client == "" {
			client = "-"
		}
		code := e.CodeSHA256
		if len(code) > 12 {
			code = code[:12]
		}
		canReplay := "no"
		if len(e.Args) > 0 {
			canReplay = "yes"
		}
		// How a run that went on after its call answered ended: waited,
		// cancelled or abandoned.
		background := e.Background
		if background == "" {
			background = "-"
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%d ms\t%s\t%s\t%s\n", e.Time.Local().Format(time.DateTime), e.RunID, client, e.Language, result, e.Metrics.WallMs, background, code, canReplay)
	}
	return 0, tw.Flush()
}

// replay re-runs a logged call with its stored arguments and says whether
// the result matches: status, error kind, exit code, both streams (by
// hash) and the artifacts (by path and hash).
func replay(ctx context.Context, cfg config, m *manifest.Manifest, r sandbox.Runner, logger *slog.Logger) (int, error) {
	entries, err := readAudit(m)
	if err != nil {
		return 1, err
	}
	e, ok := audit.Find(entries, cfg.runID)
	if !ok {
		return 1, fmt.Errorf("run %s is not in the audit log (%s)", cfg.runID, audit.PathOf(m.Audit))
	}
	if len(e.Args) == 0 {
		return 1, fmt.Errorf("run %s was logged without its code: set audit.store_code: true in the manifest to replay later runs", cfg.runID)
	}
	call := runs.DecodeCall(e.Args)
	d, done := cliDeps(m, r, "replay", logger)
	res := d.Run(ctx, cliCall(call))
	done()
	again := runs.AuditEntry(m, "replay", call, res)
	diffs := compare(e, again)
	if cfg.jsonOut {
		if err := printJSON(map[string]any{"run_id": e.RunID, "replay_run_id": res.RunID, "match": len(diffs) == 0, "differences": diffs, "result": res}); err != nil {
			return 1, err
		}
	} else {
		fmt.Printf("replayed %s as %s: %s, %d ms\n", e.RunID, res.RunID, again.Status, res.Metrics.WallMs)
		if len(diffs) == 0 {
			fmt.Println("match: same status, error kind, exit code, stdout, stderr and artifacts")
		}
		for _, d := range diffs {
			fmt.Println("differs:", d)
		}
	}
	if len(diffs) > 0 {
		return 1, nil
	}
	return 0, nil
}

func compare(was, now audit.Entry) []string {
	var d []string
	kind := func(e audit.Entry) contract.Kind {
		if e.Error == nil {
			return ""
		}
		return e.Error.Kind
	}
	code := func(e audit.Entry) string {
		if e.ExitCode == nil {
			return "none"
		}
		return fmt.Sprint(*e.ExitCode)
	}
	if was.Status != now.Status {
		d = append(d, fmt.Sprintf("status %s, now %s", was.Status, now.Status))
	}
	if kind(was) != kind(now) {
		d = append(d, fmt.Sprintf("error kind %q, now %q", kind(was), kind(now)))
	}
	if code(was) != code(now) {
		d = append(d, fmt.Sprintf("exit code %s, now %s", code(was), code(now)))
	}
	if was.StdoutSHA256 != now.StdoutSHA256 {
		d = append(d, fmt.Sprintf("stdout: was %q…, now %q…", clip(was.StdoutHead), clip(now.StdoutHead)))
	}
	if was.StderrSHA256 != now.StderrSHA256 {
		d = append(d, fmt.Sprintf("stderr: was %q…, now %q…", clip(was.StderrHead), clip(now.StderrHead)))
	}
	wa, na := artifactSet(was), artifactSet(now)
	if !bytes.Equal(wa, na) {
		d = append(d, fmt.Sprintf("artifacts: was %s, now %s", wa, na))
	}
	if was.Image != now.Image {
		d = append(d, fmt.Sprintf("note: the image changed (%s, now %s)", shortID(was.Image), shortID(now.Image)))
	}
	return d
}

func artifactSet(e audit.Entry) []byte {
	var b bytes.Buffer
	for _, a := range e.Artifacts {
		fmt.Fprintf(&b, "%s:%s ", a.Path, shortID(a.SHA256))
	}
	return bytes.TrimSpace(b.Bytes())
}

func clip(s string) string {
	if len(s) > 60 {
		return s[:60]
	}
	return s
}
