// Command durable plays, for the e2e tests, a server that dies mid-run and
// the one that comes back (a run must outlive its server), over the sandbox
// package and a real backend: `durable start` runs a job (a one-off run, or
// a session's cell with -session), writing the record RunRequest.OnSent
// gives to -record as the job leaves; the test kills it with SIGKILL.
// `durable adopt` is the restarted server: it keeps the record's box from
// its reaper (Options.Keep), adopts the run and prints its result as JSON.
package main

import (
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"log/slog"
	"os"
	"time"

	"github.com/runbox-mcp/runbox/contract"
	"github.com/runbox-mcp/runbox/manifest"
	"github.com/runbox-mcp/runbox/sandbox"
	"github.com/runbox-mcp/runbox/sandbox/backend"
)

func main() {
	if len(os.Args) < 2 {
		fmt.Fprintln(os.Stderr, "usage: durable start|adopt -manifest FILE -record FILE [-session] [-code CODE]")
		os.Exit(2)
	}
	fs := flag.NewFlagSet(os.Args[1], flag.ExitOnError)
	mpath := fs.String("manifest", "", "the manifest")
	record := fs.String("record", "", "where the run's record is kept")
	session := fs.Bool("session", false, "run the job as a session's cell")
	code := fs.String("code", "", "the Python code to run")
	host := fs.String("owner-host", "", "the host name the boxes' owner labels say (default: this host's)")
	_ = fs.Parse(os.Args[2:])
	owner := sandbox.CurrentOwner()
	if *host != "" {
		owner.Host = *host
	}
	if err := run(os.Args[1], *mpath, *record, *session, *code, owner); err != nil {
		fmt.Fprintln(os.Stderr, "durable:", err)
		os.Exit(1)
	}
}

func run(mode, mpath, record string, session bool, code string, owner sandbox.Owner) error {
	m, err := manifest.Load(mpath)
	if err != nil {
		return err
	}
	logger := slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelDebug}))
	d, err := backend.New(m, owner, logger)
	if err != nil {
		return err
	}
	ctx := context.Background()
	var res contract.Result
	switch mode {
	case "start":
		r := sandbox.New(d, sandbox.Options{Manifest: m, Logger: logger, Owner: &owner})
		if err := r.Ready(ctx); err != nil {
			return err
		}
		lang, _ := m.Language("python")
		job := contract.Job{RunID: fmt.Sprintf("r_durable%d", time.Now().UnixNano()), Language: lang, Code: code, Timeout: 90 * time.Second}
		req := sandbox.RunRequest{Job: job, OnSent: func(rec sandbox.Detached) {
			b, _ := json.Marshal(rec)
			tmp := record + ".tmp"
			if os.WriteFile(tmp, b, 0o600) == nil {
				_ = os.Rename(tmp, record)
			}
		}}
		if session {
			info, e := r.OpenSession(ctx, sandbox.SessionRequest{Language: lang, Client: "durable", Limits: m.SessionLimits()})
			if e != nil {
				return fmt.Errorf("opening a session: %s", e.Message)
			}
			res = r.RunInSession(ctx, info.ID, "durable", req)
		} else {
			res = r.Run(ctx, req)
		}
	case "adopt":
		b, err := os.ReadFile(record)
		if err != nil {
			return err
		}
		var rec sandbox.Detached
		if err := json.Unmarshal(b, &rec); err != nil {
			return err
		}
		r := sandbox.New(d, sandbox.Options{Manifest: m, Logger: logger, Owner: &owner, Keep: func(id string) bool { return id == rec.BoxID }})
		defer r.Close()
		if err := r.Ready(ctx); err != nil {
			return err
		}
		// While a cell is adopted, its session says it is busy with it.
		busy := make(chan bool, 1)
		stop := make(chan struct{})
		go func() {
			seen := false
			for {
				for _, s := range r.ListSessions(rec.Client) {
					seen = seen || s.Running == rec.RunID
				}
				select {
				case <-stop:
					busy <- seen
					return
				case <-time.After(100 * time.Millisecond):
				}
			}
		}()
		res = r.Adopt(ctx, rec)
		close(stop)
		if rec.Session != "" {
			out := struct {
				contract.Result
				BusySeen bool `json:"busy_seen"`
			}{res, <-busy}
			_ = r.CloseSession(ctx, rec.Session, rec.Client)
			return json.NewEncoder(os.Stdout).Encode(out)
		}
	default:
		return fmt.Errorf("unknown mode %q", mode)
	}
	return json.NewEncoder(os.Stdout).Encode(res)
}
