package main

import (
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"slices"
	"strings"

	"github.com/runbox-mcp/runbox/images"
)

var errHelp = errors.New("help shown")

const usage = `runbox — run the code AI agents write, safely, over MCP.

Usage:
  runbox serve [flags]            serve the MCP tools (stdio, streamable HTTP or SSE)
  runbox run [flags] FILE | -     run one file (or stdin) in a box and print its output
  runbox manifest [schema]        print the effective manifest as JSON, or its JSON Schema
  runbox setup [flags]            check the engine and make the sandbox image available on it
  runbox images build [--force]   build the derived image of the manifest's packages (nothing when current)
  runbox config CLIENT [--write]  print (or merge into the client's file) an MCP entry for runbox;
                                  CLIENT is claude-desktop, claude-code or vscode
  runbox doctor [--json]          check the set-up end to end and say how to fix what fails
  runbox runs [--limit N] [--json] list the latest runs from the audit log
  runbox replay RUN_ID [--json]   run a logged call again and say whether the result matches
  runbox sessions [--json]        list the session boxes on the backend (any server's)
  runbox version                  print version, commit and build date

Common flags:
  --manifest FILE      the manifest (YAML or JSON; env RUNBOX_MANIFEST; default: ./runbox.yaml
                       if it exists, else the built-in defaults)
  --log-level LEVEL    debug, info, warn or error (env RUNBOX_LOG_LEVEL; default info)

Run 'runbox COMMAND --help' for a command's flags.
`

// config is everything the flags and environment say.
type config struct {
	command      string
	logLevel     string
	manifestPath string

	// run
	file     string
	language string
	timeout  float64
	jsonOut  bool
	outDir   string

	// manifest
	schema bool

	// runs, replay
	limit int
	runID string

	// images
	imagesForce bool

	// setup, config
	setup  setupConfig
	client clientConfig

	// serve
	transport string
	listen    string
	authToken string
}

func parse(args []string) (config, error) {
	cfg := config{logLevel: envOr("RUNBOX_LOG_LEVEL", "info"), manifestPath: os.Getenv("RUNBOX_MANIFEST")}
	if len(args) == 0 {
		fmt.Fprint(os.Stderr, usage)
		return cfg, errors.New("a command is required")
	}
	cfg.command = args[0]
	fs := flag.NewFlagSet("runbox "+cfg.command, flag.ContinueOnError)
	fs.SetOutput(io.Discard)
	fs.StringVar(&cfg.logLevel, "log-level", cfg.logLevel, "debug, info, warn or error")
	fs.StringVar(&cfg.manifestPath, "manifest", cfg.manifestPath, "the manifest file, YAML or JSON (default: ./runbox.yaml if it exists, else built-in defaults)")
	var help string
	switch cfg.command {
	case "help", "-h", "--help":
		fmt.Fprint(os.Stdout, usage)
		return cfg, errHelp
	case "serve":
		help = "Usage: runbox serve [flags]\n\nServes run_code over MCP. On stdio, stdout carries the protocol and logs go to stderr.\nOn http (streamable, at /mcp) or sse (at /sse), it listens on 127.0.0.1 unless told otherwise;\nanother address needs a bearer token. A browser request from an Origin other than the listener's own\nis refused unless the manifest declares it (http.allowed_origins). Named tokens (http.tokens, one per\nperson or agent) bind each session to the token that opened it.\nWith servers in the manifest, runbox connects to those MCP servers and the code calls their tools\n(import runbox_tools), under the manifest's policy and tool_calls bounds; search_tools describes them.\n"
		fs.StringVar(&cfg.transport, "transport", envOr("RUNBOX_TRANSPORT", "stdio"), "stdio, http or sse (env RUNBOX_TRANSPORT)")
		fs.StringVar(&cfg.listen, "listen", envOr("RUNBOX_LISTEN", "127.0.0.1:8080"), "address for http and sse (env RUNBOX_LISTEN)")
		fs.StringVar(&cfg.authToken, "auth-token", "", "bearer token required on http and sse (env RUNBOX_AUTH_TOKEN)")
	case "run":
		help = "Usage: runbox run [flags] FILE | -\n\nRuns FILE (or the code on stdin, with -) in a fresh box and prints its stdout and stderr;\nexits with the program's exit code. When FILE is given, runbox's stdin is the program's.\nThen it names on stderr each artifact and each display (display(), plt.show(), a frame,\nconsole.table); with --out, their files: the artifacts at their paths, the displays'\nrepresentations as displays/<index>-<name> (0-image.png, 1-table.json, 1-text.txt).\n"
		fs.StringVar(&cfg.language, "language", "", "python, javascript, typescript or bash (default: from the file's extension)")
		fs.Float64Var(&cfg.timeout, "timeout", 0, "wall-clock limit in seconds (default: the manifest's)")
		fs.BoolVar(&cfg.jsonOut, "json", false, "print the whole structured result as JSON")
		fs.StringVar(&cfg.outDir, "out", "", "write the run's artifacts, and its displays under displays/, into this directory")
	case "manifest":
		help = "Usage: runbox manifest [--manifest FILE] [schema]\n\nPrints the effective manifest (the file over the defaults) as JSON;\nwith schema, the manifest file's JSON Schema (for editor completion).\n"
	case "doctor":
		help = "Usage: runbox doctor [--json] [--manifest FILE]\n\nChecks the manifest, the engine (version, API, cgroups), the runtimes' versions, the images\n(present, digest, recipe current) and each isolation level by starting a box that reports its\nhardening (uid, capabilities, no-new-privileges, seccomp, network, root) and tries ptrace,\nand says for each network entry with a credential where its secret comes from and whether it\nis there (never its value).\nEvery failing check prints its fix; exits 1 when anything required fails.\n"
		fs.BoolVar(&cfg.jsonOut, "json", false, "print the report as JSON")
	case "runs":
		help = "Usage: runbox runs [--limit N] [--json]\n\nLists the latest runs from the audit log (audit.path): time, run id, client, language,\nresult, wall time, code hash, and whether it can be replayed (audit.store_code).\n"
		fs.IntVar(&cfg.limit, "limit", 20, "how many of the latest runs (0: all)")
		fs.BoolVar(&cfg.jsonOut, "json", false, "print the audit entries as JSON lines")
	case "replay":
		help = "Usage: runbox replay RUN_ID [--json]\n\nRuns a logged call again with its stored code, stdin and files (needs audit.store_code) and\ncompares status, error kind, exit code, stdout, stderr and artifacts; exits 1 when they differ.\n"
		fs.BoolVar(&cfg.jsonOut, "json", false, "print the comparison and the new result as JSON")
	case "setup":
		help = "Usage: runbox setup [flags]\n\nChecks the engine (found as runbox serve finds it: DOCKER_HOST, the Docker context, Docker Desktop's,\nColima's, OrbStack's or Podman's socket), then makes the sandbox image available on it: nothing to do\nwhen it is there with this runbox's recipe; else pull the published image this binary pins by digest\n(when the engine reaches a registry); else build it inside the engine from the embedded recipe\n(debootstrap of Debian bookworm in a pinned Debian base; no root or Linux needed here, a few minutes).\n--method host builds it on this machine instead (Linux, root, debootstrap: images/build.sh).\nWhen the manifest declares packages, it then builds their derived image, as runbox images build does.\n"
		fs.StringVar(&cfg.setup.method, "method", "auto", "auto (current, else pull, else engine build), pull, engine or host")
		fs.StringVar(&cfg.setup.image, "image", images.Image, "the image tag to make available")
		fs.StringVar(&cfg.setup.base, "base", images.DebianBase, "the Debian bookworm image the engine build starts from (a local tag where no registry is reachable)")
		fs.StringVar(&cfg.setup.mirror, "mirror", os.Getenv("RUNBOX_DEBIAN_MIRROR"), "the Debian mirror of the engine build (env RUNBOX_DEBIAN_MIRROR; default: the base's)")
		fs.StringVar(&cfg.setup.network, "network", "", "the engine build's network mode, e.g. host (default: the engine's)")
		fs.BoolVar(&cfg.setup.force, "force", false, "make the image again even when it is current")
	case "images":
		help = imagesHelp
		fs.BoolVar(&cfg.imagesForce, "force", false, "build even when the image is current")
		fs.BoolVar(&cfg.jsonOut, "json", false, "print what was built (or found current) as JSON")
	case "config":
		help = "Usage: runbox config CLIENT [--write] [--file FILE]\n\nPrints the MCP server entry that starts this runbox (by its absolute path) for CLIENT: claude-desktop,\nclaude-code or vscode. With --write, merges it into CLIENT's file for this platform (or FILE), keeping\nevery other server and setting; a file that is not valid JSON is an error and is left as it is.\nOn Windows, Claude Desktop's file is its MSIX package's (%LOCALAPPDATA%\\Packages\\Claude_*\\LocalCache\\Roaming\\Claude)\nwhen that package is installed. `runbox doctor` says which file each client reads.\n"
		fs.BoolVar(&cfg.client.write, "write", false, "merge the entry into the client's configuration file")
		fs.StringVar(&cfg.client.file, "file", "", "the configuration file to write (default: the client's, for this platform)")
		fs.StringVar(&cfg.client.name, "name", "runbox", "the server's name in the file")
	case "sessions":
		help = "Usage: runbox sessions [--json]\n\nLists the session boxes on the backend, whichever server opened them: box, language, the\nsession's key (the sha256 of its id: ids are capabilities and are never stored), the client's\nhash, and when its maximum lifetime ends (the reaper removes it then).\n"
		fs.BoolVar(&cfg.jsonOut, "json", false, "print the sessions as JSON")
	case "version":
		help = "Usage: runbox version\n"
	default:
		fmt.Fprint(os.Stderr, usage)
		return cfg, fmt.Errorf("unknown command %q", cfg.command)
	}
	rest := args[1:]
	if cfg.command == "config" || cfg.command == "images" {
		// `runbox config claude-desktop --write`: flags after the client too.
		rest = interspersed(fs, rest)
	}
	if err := fs.Parse(rest); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			fmt.Fprint(os.Stdout, help+"\nFlags:\n")
			fs.SetOutput(os.Stdout)
			fs.PrintDefaults()
			return cfg, errHelp
		}
		return cfg, err
	}
	switch cfg.command {
	case "run":
		if fs.NArg() != 1 {
			return cfg, errors.New("run takes one FILE, or - for stdin")
		}
		cfg.file = fs.Arg(0)
	case "replay":
		if fs.NArg() != 1 {
			return cfg, errors.New("replay takes one RUN_ID (see runbox runs)")
		}
		cfg.runID = fs.Arg(0)
	case "config":
		if fs.NArg() != 1 {
			return cfg, errors.New("config takes one CLIENT: claude-desktop, claude-code or vscode")
		}
		cfg.client.client = fs.Arg(0)
	case "images":
		if fs.NArg() != 1 || fs.Arg(0) != "build" {
			return cfg, errors.New("images takes one subcommand: build")
		}
	case "manifest":
		switch {
		case fs.NArg() == 1 && fs.Arg(0) == "schema":
			cfg.schema = true
		case fs.NArg() != 0:
			return cfg, errors.New("manifest takes no argument but schema")
		}
	default:
		if fs.NArg() != 0 {
			return cfg, fmt.Errorf("%s takes no arguments", cfg.command)
		}
	}
	if cfg.command == "serve" {
		if cfg.authToken == "" {
			cfg.authToken = os.Getenv("RUNBOX_AUTH_TOKEN")
		}
		if !slices.Contains([]string{"stdio", "http", "sse"}, cfg.transport) {
			return cfg, fmt.Errorf("--transport %q: use stdio, http or sse", cfg.transport)
		}
	}
	if !slices.Contains([]string{"debug", "info", "warn", "error"}, strings.ToLower(cfg.logLevel)) {
		return cfg, fmt.Errorf("--log-level %q: use debug, info, warn or error", cfg.logLevel)
	}
	return cfg, nil
}

// interspersed puts the positional arguments after the flags, so that
// flags may follow them; a flag's value (--file x) stays with its flag.
func interspersed(fs *flag.FlagSet, args []string) []string {
	var flags, pos []string
	for i := 0; i < len(args); i++ {
		a := args[i]
		if a == "--" {
			pos = append(pos, args[i+1:]...)
			break
		}
		if !strings.HasPrefix(a, "-") || a == "-" {
			pos = append(pos, a)
			continue
		}
		flags = append(flags, a)
		name := strings.TrimLeft(a, "-")
		if strings.Contains(name, "=") {
			continue
		}
		if f := fs.Lookup(name); f != nil && i+1 < len(args) {
			if b, ok := f.Value.(interface{ IsBoolFlag() bool }); !ok || !b.IsBoolFlag() {
				i++
				flags = append(flags, args[i])
			}
		}
	}
	return append(append(flags, "--"), pos...)
}

func envOr(key, def string) string {
	if v := os.Getenv(key); v != "" {
		return v
	}
	return def
}
