package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/runbox-mcp/runbox/contract"
	"github.com/runbox-mcp/runbox/sandbox/backend"

	"github.com/lmittmann/tint"

	"github.com/runbox-mcp/runbox/audit"
	"github.com/runbox-mcp/runbox/egress"
	"github.com/runbox-mcp/runbox/images/derived"
	"github.com/runbox-mcp/runbox/internal/doctor"
	"github.com/runbox-mcp/runbox/internal/mcpserver"
	"github.com/runbox-mcp/runbox/internal/pollfd"
	"github.com/runbox-mcp/runbox/internal/runstore"
	"github.com/runbox-mcp/runbox/manifest"
	"github.com/runbox-mcp/runbox/metrics"
	"github.com/runbox-mcp/runbox/runs"
	"github.com/runbox-mcp/runbox/sandbox"
)

// run carries out one command and returns the process exit code.
func run(ctx context.Context, cfg config) (int, error) {
	logger := newLogger(cfg.logLevel)
	switch {
	case cfg.command == "version":
		fmt.Printf("runbox %s (commit %s, built %s)\n", version, commit, date)
		return 0, nil
	case cfg.command == "manifest" && cfg.schema:
		_, err := fmt.Printf("%s\n", manifest.Schema())
		return 0, err
	case cfg.command == "config":
		return runConfig(cfg)
	}
	disc := useDiscoveredEngine(logger)
	if cfg.command == "setup" {
		return runSetup(ctx, cfg, disc)
	}
	m, source, err := manifest.LoadDefault(cfg.manifestPath)
	if cfg.command == "images" {
		return runImages(ctx, cfg, m, err)
	}
	// With packages declared, the languages run on their derived image:
	// the one step that derives the manifest the server runs with, before
	// anything holds it. From here on it is read-only.
	m, derivedImages := derived.Apply(m)
	if cfg.command == "doctor" {
		return runDoctor(ctx, cfg, m, source, err, logger, disc, derivedImages)
	}
	if err != nil {
		return 2, err
	}
	if source != "" {
		logger.Debug("manifest", "path", source)
	}
	switch cfg.command {
	case "runs":
		return listRuns(cfg, m)
	case "manifest":
		return 0, printJSON(m)
	}
	var icpt *egress.Interception
	if cfg.command != "sessions" {
		// Listing sessions runs no code: it needs no secret.
		if icpt, err = interception(m); err != nil {
			return 2, err
		}
	}
	// The long runs' records are read before the runner starts, so that
	// its reaper leaves the boxes they hold to be adopted.
	var runs *runstore.Store
	if cfg.command == "serve" {
		if runs, err = openRuns(m, logger); err != nil {
			return 1, err
		}
	}
	runner, err := newBackend(m, logger, icpt, runs)
	if err != nil {
		return 1, err
	}
	defer runner.Close()
	switch cfg.command {
	case "serve":
		var tokens map[string]string
		if cfg.transport != mcpserver.TransportStdio {
			if tokens, err = m.HTTP.TokenValues(); err != nil {
				return 2, err
			}
			anyToken := cfg.authToken
			for _, v := range tokens {
				anyToken += v
			}
			if err := mcpserver.CheckListen(cfg.listen, anyToken); err != nil {
				return 2, err
			}
		}
		logger.Info("starting", "version", version, "transport", cfg.transport, "backend", m.Backend, "isolation", m.Isolation, "languages", m.LanguageNames())
		s, mx, stop, err := serving(ctx, cfg, m, runner, runs, derivedImages, logger)
		if err != nil {
			return 1, err
		}
		defer stop()
		if cfg.transport == mcpserver.TransportStdio {
			// Read parked (pollfd): fewer threads woken on every request.
			return 0, s.ServeStdio(ctx, pollfd.Pollable(os.Stdin), os.Stdout)
		}
		hc := mcpserver.HTTPConfig{Transport: cfg.transport, Addr: cfg.listen, Token: cfg.authToken, Tokens: tokens,
			AllowedOrigins: m.HTTP.AllowedOrigins, Logger: logger, MetricsAddr: m.Metrics.Listen, Refused: mx.HTTPRefused,
			MaxRequestBytes: int64(m.HTTP.MaxRequestBytes), MaxConnectionsPerAddress: m.HTTP.MaxConnectionsPerAddress,
			MaxUnauthenticatedConnections: m.HTTP.MaxUnauthenticatedConnections}
		if mx != nil {
			hc.Metrics = mx.Handler()
		}
		return 0, s.ServeHTTP(ctx, hc)
	case "sessions":
		return listSessions(ctx, cfg, runner)
	case "run":
		return runFile(ctx, cfg, m, runner, logger)
	case "replay":
		return replay(ctx, cfg, m, runner, logger)
	}
	return 2, fmt.Errorf("unknown command %q", cfg.command)
}

// serving wires what serve serves over the runner: the engine readied and
// the images probed beside serving, the cache, the audit log, the upstream
// servers, metrics, and the MCP server, told the images' descriptions as
// they come. m is read-only: every description is a copy (describe). stop
// closes what it opened. mx is nil when metrics are off.
func serving(ctx context.Context, cfg config, m *manifest.Manifest, runner *sandbox.BoxRunner, runs *runstore.Store, derivedImages []derived.Image, logger *slog.Logger) (s *mcpserver.Server, mx *metrics.Metrics, stop func(), err error) {
	auditLog, err := audit.Open(m.Audit)
	if err != nil {
		return nil, nil, nil, fmt.Errorf("%w (set audit.path to a writable file, or audit.enabled: false)", err)
	}
	// The engine is readied and the images probed beside serving, never
	// before it: a client that does not wait for initialize (Codex)
	// would start without runbox's tools.
	described := make(chan *manifest.Manifest, 1)
	// stop cancels the probes and waits for them: a probe's box still
	// running when the server stops is removed by its run, before the
	// runner closes (on Podman a box outlives its server's attach).
	pctx, pcancel := context.WithCancel(ctx)
	prepared := make(chan struct{})
	go func() {
		defer close(prepared)
		prepareEngine(pctx, m, runner, derivedImages, described, logger)
	}()
	var r sandbox.Runner = runner
	if m.Cache.Enabled {
		r = sandbox.NewCache(runner, m, runner.ImageDigest)
	}
	opts := mcpserver.Options{Version: version, Logger: logger, Transport: cfg.transport, Audit: auditLog, Described: described, Runs: runs}
	opts.Upstream = startUpstream(ctx, m, logger)
	if m.Metrics.Enabled && cfg.transport != mcpserver.TransportStdio {
		opts.Metrics = metrics.New(version, m.Isolation, runner)
	}
	// The agent is told what the images had when last probed, at once;
	// the probes beside serving confirm or correct it.
	s = mcpserver.New(describeFromCache(m), r, opts)
	return s, opts.Metrics, func() {
		pcancel()
		<-prepared
		opts.Upstream.Close()
		auditLog.Close()
	}, nil
}

// openRuns opens the run store: the long runs' and tasks' records in the
// state directory, which outlive the process (a restarted server answers
// run_wait for a run it did not start), kept as long as a run's files (at
// least a minute) within the manifest's bounds.
func openRuns(m *manifest.Manifest, logger *slog.Logger) (*runstore.Store, error) {
	return runstore.Open(filepath.Join(audit.StateDir(), "runs"), runstore.Options{
		MaxEntries: m.Limits.KeptResults, MaxBytes: int64(m.Limits.KeptResultsBytes),
		Keep: max(m.Artifacts.TTL(), time.Minute), Stale: m.Limits.MaxTimeout() + max(m.Artifacts.TTL(), time.Minute),
		Logger: logger})
}

// newBackend makes the runner over the driver the manifest's backend
// names; runs, when set, holds boxes its reaper must leave.
func newBackend(m *manifest.Manifest, logger *slog.Logger, icpt *egress.Interception, store *runstore.Store) (*sandbox.BoxRunner, error) {
	// A box whose run the store keeps is marked with the store's state
	// directory, which other state directories' reapers leave
	// (sandbox.Driver.MarkKept).
	owner := sandbox.CurrentOwner()
	if store != nil {
		owner.State = sandbox.StateKey(store.Dir())
	}
	d, err := newDriver(m, owner, logger)
	if err != nil {
		return nil, err
	}
	o := sandbox.Options{Manifest: m, Logger: logger, Network: proxies(m, icpt), CA: icpt.CAPEM(), Workspaces: workspacesDir(m),
		Checkpoints: filepath.Join(audit.StateDir(), "checkpoints")}
	if store != nil {
		o.Keep = runs.KeepsBox(store)
	}
	return sandbox.New(d, o), nil
}

// proxies makes each run's side of the manifest's network: egress's proxy
// over its endpoints, adding the credentials icpt holds, asking the run's
// approver for approve: ask entries.
func proxies(m *manifest.Manifest, icpt *egress.Interception) func(time.Time, sandbox.Approver) sandbox.Network {
	return func(deadline time.Time, approve sandbox.Approver) sandbox.Network {
		return egress.New(egress.Options{Network: m.Network, Deadline: deadline, Approve: approve, Interception: icpt})
	}
}

// interception reads the secrets of the manifest's network entries that
// declare a credential (a missing one fails the start, naming its field)
// and opens runbox's CA in the state directory; nil when no entry has one.
func interception(m *manifest.Manifest) (*egress.Interception, error) {
	if !m.Network.Intercepts() {
		return nil, nil
	}
	creds, err := egress.LoadCredentials(m.Network, os.LookupEnv)
	if err != nil {
		return nil, fmt.Errorf("manifest: %w", err)
	}
	ca, err := egress.OpenCA(filepath.Join(audit.StateDir(), "ca"), egress.CAHosts(m.Network))
	if err != nil {
		return nil, err
	}
	return &egress.Interception{Credentials: creds, CA: ca}, nil
}

// newDriver connects to the platform the manifest's backend names.
func newDriver(m *manifest.Manifest, owner sandbox.Owner, logger *slog.Logger) (sandbox.Driver, error) {
	return backend.New(m, owner, logger)
}

func runDoctor(ctx context.Context, cfg config, m *manifest.Manifest, source string, loadErr error, logger *slog.Logger, disc doctor.Discovery, derivedImages []derived.Image) (int, error) {
	if cfg.logLevel == "info" {
		// The report says it all; the runner's own logs would interleave.
		logger = newLogger("error")
	}
	rep := doctor.Run(ctx, doctor.Options{Manifest: m, ManifestPath: orPath(source, cfg.manifestPath), ManifestErr: loadErr, Logger: logger, Discovery: disc, Derived: derivedImages, ClientFiles: clientFiles})
	if cfg.jsonOut {
		if err := printJSON(rep); err != nil {
			return 1, err
		}
	} else {
		rep.Print(os.Stdout)
	}
	if !rep.OK {
		return 1, nil
	}
	return 0, nil
}

func orPath(source, flag string) string {
	if source != "" {
		return source
	}
	return flag
}

// prepareEngine readies the engine (the pool starts filling) and sends
// the manifest as the images describe their languages, once, on
// described.
func prepareEngine(ctx context.Context, m *manifest.Manifest, runner *sandbox.BoxRunner, derivedImages []derived.Image, described chan<- *manifest.Manifest, logger *slog.Logger) {
	defer close(described)
	start := time.Now()
	warnDerived(ctx, runner, derivedImages, logger)
	if err := runner.Ready(ctx); err != nil {
		// Not fatal: calls report it until the engine is back.
		logger.Warn("engine not ready", "err", err)
		return
	}
	if m.Backend == manifest.BackendKubernetes {
		logger.Info("kubernetes backend: telling agents the manifest's declared versions and packages (images are not probed)")
		return
	}
	described <- describeFromImages(ctx, m, runner, logger)
	logger.Debug("engine ready and images described", "took", time.Since(start).Round(time.Millisecond))
}

// describeFromImages returns the manifest as each image describes its
// language, probed in a box (a language whose image cannot say keeps the
// declared versions and packages), so the agent is told what is really
// installed.
func describeFromImages(ctx context.Context, m *manifest.Manifest, d *sandbox.BoxRunner, logger *slog.Logger) *manifest.Manifest {
	ctx, cancel := context.WithTimeout(ctx, 60*time.Second)
	defer cancel()
	infos := make([]*sandbox.LanguageInfo, len(m.Languages))
	var wg sync.WaitGroup
	for i, lang := range m.Languages {
		wg.Add(1)
		go func() {
			defer wg.Done()
			info, err := sandbox.Probe(ctx, d, d.ImageDigest, lang, 30*time.Second)
			if err != nil {
				logger.Warn("could not read the image's packages; telling agents the manifest's", "language", lang.Name, "err", err)
				return
			}
			infos[i] = &info
		}()
	}
	wg.Wait()
	return describe(m, infos)
}

// describeFromCache returns the manifest as the last probes of its images
// described it (LastProbe).
func describeFromCache(m *manifest.Manifest) *manifest.Manifest {
	if m.Backend == manifest.BackendKubernetes {
		return m
	}
	infos := make([]*sandbox.LanguageInfo, len(m.Languages))
	for i, lang := range m.Languages {
		if info, ok := sandbox.LastProbe(lang); ok {
			infos[i] = &info
		}
	}
	return describe(m, infos)
}

// describe returns a copy of m whose languages have the versions and
// packages infos give (nil: the declared ones stay), or m itself when
// infos give none. m is not changed: the server and the runner hold it.
func describe(m *manifest.Manifest, infos []*sandbox.LanguageInfo) *manifest.Manifest {
	if !slices.ContainsFunc(infos, func(i *sandbox.LanguageInfo) bool { return i != nil }) {
		return m
	}
	out := *m
	out.Languages = slices.Clone(m.Languages)
	for i, info := range infos {
		if info != nil {
			out.Languages[i].Version, out.Languages[i].Packages = info.Version, info.Packages
		}
	}
	return &out
}

// extensions maps file extensions to languages for `runbox run`.
var extensions = map[string]string{".py": "python", ".js": "javascript", ".cjs": "javascript", ".ts": "typescript", ".cts": "typescript", ".sh": "bash", ".bash": "bash"}

func runFile(ctx context.Context, cfg config, m *manifest.Manifest, r sandbox.Runner, logger *slog.Logger) (int, error) {
	lang := cfg.language
	if lang == "" {
		lang = extensions[strings.ToLower(filepath.Ext(cfg.file))]
		if lang == "" {
			return 2, errors.New("cannot tell the language from the file name: pass --language")
		}
	}
	var code []byte
	var stdin string
	var err error
	if cfg.file == "-" {
		code, err = io.ReadAll(os.Stdin)
	} else {
		code, err = os.ReadFile(cfg.file)
		if err == nil && !isTerminal(os.Stdin) {
			var in []byte
			in, err = io.ReadAll(io.LimitReader(os.Stdin, int64(m.Limits.InputBytes)+1))
			stdin = string(in)
		}
	}
	if err != nil {
		return 2, err
	}
	args := runs.RunCodeArgs{Language: lang, Code: string(code), Stdin: stdin}
	if cfg.timeout > 0 {
		args.TimeoutSeconds = &cfg.timeout
	}
	d, done := cliDeps(m, r, "cli", logger)
	res := d.Run(ctx, cliCall(runs.Call{Args: args}))
	done()

	var shown [][]string
	if cfg.outDir != "" {
		if err := writeArtifacts(cfg.outDir, res.Artifacts); err != nil {
			return 1, err
		}
		if shown, err = writeDisplays(cfg.outDir, res.Displays); err != nil {
			return 1, err
		}
	}
	if cfg.jsonOut {
		if err := printJSON(res); err != nil {
			return 1, err
		}
	} else {
		fmt.Fprint(os.Stdout, res.Stdout)
		fmt.Fprint(os.Stderr, res.Stderr)
		if e := res.Error; e != nil {
			fmt.Fprintf(os.Stderr, "runbox: %s", e.Kind)
			if e.Line > 0 {
				fmt.Fprintf(os.Stderr, " at line %d", e.Line)
			}
			fmt.Fprintf(os.Stderr, ": %s\nrunbox: hint: %s\n", e.Message, e.Hint)
		}
		for _, a := range res.Artifacts {
			fmt.Fprintf(os.Stderr, "runbox: artifact %s (%d bytes)\n", a.Path, a.SizeBytes)
		}
		for i, d := range res.Displays {
			var files []string
			if shown != nil {
				files = shown[i]
			}
			fmt.Fprintf(os.Stderr, "runbox: %s\n", describeDisplay(d, files))
		}
		if res.DisplaysOmitted > 0 {
			fmt.Fprintf(os.Stderr, "runbox: %d more displays omitted\n", res.DisplaysOmitted)
		}
	}
	switch {
	case res.ExitCode != nil && *res.ExitCode != 0:
		return *res.ExitCode, nil
	case res.Status == contract.StatusError:
		return 1, nil
	}
	return 0, nil
}

// writeArtifacts saves artifacts under dir, refusing any path that would
// leave it.
func writeArtifacts(dir string, arts []contract.Artifact) error {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return err
	}
	root, err := os.OpenRoot(dir)
	if err != nil {
		return err
	}
	defer root.Close()
	for _, a := range arts {
		if a.Data == nil {
			continue
		}
		if d := filepath.Dir(a.Path); d != "." {
			if err := root.MkdirAll(d, 0o755); err != nil {
				return err
			}
		}
		if err := root.WriteFile(a.Path, a.Data, 0o644); err != nil {
			return err
		}
	}
	return nil
}

// displaysDir is the directory under --out that holds the displays' data.
const displaysDir = "displays"

// writeDisplays saves each kept representation of displays under
// dir/displays as <index>-<name> (0-image.png, 1-table.json), the name its
// resource has, and returns the files of each display, relative to dir, in
// DisplayMimeOrder.
func writeDisplays(dir string, displays []contract.Display) ([][]string, error) {
	if len(displays) == 0 {
		return nil, nil
	}
	if err := os.MkdirAll(filepath.Join(dir, displaysDir), 0o755); err != nil {
		return nil, err
	}
	root, err := os.OpenRoot(filepath.Join(dir, displaysDir))
	if err != nil {
		return nil, err
	}
	defer root.Close()
	files := make([][]string, len(displays))
	for i, d := range displays {
		for _, mime := range displayMimes(d) {
			m := d.Mimes[mime]
			_, index, name, ok := contract.ParseDisplayURI(m.URI)
			if m.Data == nil || !ok {
				continue
			}
			file := strconv.Itoa(index) + "-" + name
			if err := root.WriteFile(file, m.Data, 0o644); err != nil {
				return nil, err
			}
			files[i] = append(files[i], filepath.Join(displaysDir, file))
		}
	}
	return files, nil
}

// displayMimes are d's mimes in DisplayMimeOrder, then any other in
// alphabetical order.
func displayMimes(d contract.Display) []string {
	var out []string
	for _, mime := range contract.DisplayMimeOrder {
		if _, ok := d.Mimes[mime]; ok {
			out = append(out, mime)
		}
	}
	for _, mime := range slices.Sorted(maps.Keys(d.Mimes)) {
		if !slices.Contains(out, mime) {
			out = append(out, mime)
		}
	}
	return out
}

// describeDisplay is the line `runbox run` prints for a display: its
// index and source, then the files written for it, or, without --out, its
// mimes; an image's size and a table's shape; why any of it was cut.
func describeDisplay(d contract.Display, files []string) string {
	var b strings.Builder
	fmt.Fprintf(&b, "display %d (%s):", d.Index, d.Source)
	for _, mime := range displayMimes(d) {
		m := d.Mimes[mime]
		b.WriteString(" " + mime)
		switch {
		case m.Width > 0 && m.Height > 0:
			fmt.Fprintf(&b, " %dx%d", m.Width, m.Height)
		case m.Rows != nil && m.Columns != nil:
			fmt.Fprintf(&b, " %d rows x %d columns", *m.Rows, *m.Columns)
		}
		if _, _, name, ok := contract.ParseDisplayURI(m.URI); ok {
			for _, f := range files {
				if strings.HasSuffix(f, "-"+name) {
					b.WriteString(" in " + f)
				}
			}
		}
		b.WriteString(",")
	}
	out := strings.TrimSuffix(b.String(), ",")
	if d.Cut != "" {
		out += " (cut: " + d.Cut + ")"
	}
	return out
}

func isTerminal(f *os.File) bool {
	st, err := f.Stat()
	return err == nil && st.Mode()&os.ModeCharDevice != 0
}

// newLogger logs to stderr: colour on a terminal, JSON otherwise. Stdout
// belongs to the stdio transport.
func newLogger(level string) *slog.Logger {
	var lv slog.Level
	_ = lv.UnmarshalText([]byte(level))
	if isTerminal(os.Stderr) {
		return slog.New(tint.NewHandler(os.Stderr, &tint.Options{Level: lv}))
	}
	return slog.New(slog.NewJSONHandler(os.Stderr, &slog.HandlerOptions{Level: lv}))
}

// printJSON writes v to stdout as indented JSON.
func printJSON(v any) error {
	enc := json.NewEncoder(os.Stdout)
	enc.SetIndent("", "  ")
	return enc.Encode(v)
}

// workspacesDir is where the named workspaces live: the manifest's
// workspaces.dir, else the state directory's workspaces/.
func workspacesDir(m *manifest.Manifest) string {
	if m.Workspaces.Dir != "" {
		return m.Workspaces.Dir
	}
	return filepath.Join(audit.StateDir(), "workspaces")
}
