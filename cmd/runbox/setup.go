package main

import (
	"context"
	"errors"
	"fmt"
	"os"
	"time"

	"github.com/runbox-mcp/runbox/images"
	"github.com/runbox-mcp/runbox/images/derived"
	"github.com/runbox-mcp/runbox/internal/doctor"
	"github.com/runbox-mcp/runbox/internal/enginehost"
	"github.com/runbox-mcp/runbox/internal/setup"
	"github.com/runbox-mcp/runbox/manifest"
	"github.com/runbox-mcp/runbox/sandbox"
)

// setupConfig is `runbox setup`'s flags.
type setupConfig struct {
	method  string
	image   string
	base    string
	mirror  string
	network string
	force   bool
}

// runSetup checks the engine, then makes the sandbox image available on it
// (internal/setup). Progress goes to stderr; the last line says what was done.
func runSetup(ctx context.Context, cfg config, disc doctor.Discovery) (int, error) {
	s := cfg.setup
	out := os.Stderr
	switch {
	case errors.Is(disc.Err, enginehost.ErrNotFound) && os.Getenv("DOCKER_HOST") == "":
		fmt.Fprintln(out, "setup: no engine found.", doctor.StartFix(disc.GOOS, ""))
		return 1, errors.New("no container engine")
	case disc.Err != nil && !errors.Is(disc.Err, enginehost.ErrNotFound):
		return 1, disc.Err
	}
	eng, err := setup.NewMoby()
	if err != nil {
		return 1, err
	}
	defer eng.Close()
	pctx, cancel := context.WithTimeout(ctx, 15*time.Second)
	desc, arch, err := eng.Describe(pctx)
	cancel()
	if err != nil {
		fmt.Fprintln(out, "setup:", err)
		fmt.Fprintln(out, "setup:", doctor.StartFix(disc.GOOS, disc.Endpoint.Engine))
		return 1, errors.New("the engine does not answer")
	}
	where := "the engine"
	if disc.Err == nil && disc.Endpoint.Host != "" {
		where = fmt.Sprintf("%s (%s)", disc.Endpoint.Host, disc.Endpoint.Source)
		if disc.Endpoint.Engine != "" {
			where = disc.Endpoint.Engine + " at " + where
		}
	}
	fmt.Fprintf(out, "setup: engine: %s, %s\n", where, desc)
	// The boxes also need runbox-init for the engine's architecture: said
	// before minutes of building, not after.
	if dir, err := sandbox.InitDirOr(""); err == nil {
		if _, err := sandbox.ReadInitBinary(dir, arch); err != nil {
			fmt.Fprintf(out, "setup: %v\nsetup: the release archives carry it beside runbox; after `go install`, run `CGO_ENABLED=0 GOOS=linux GOARCH=%s go install github.com/runbox-mcp/runbox/cmd/runbox-init@latest`\n", err, arch)
			return 1, errors.New("runbox-init is missing")
		}
	}
	wd, _ := os.Getwd()
	res, err := setup.Run(ctx, eng, setup.Options{
		Image:     s.image,
		Recipe:    images.RecipeHash(),
		Method:    setup.Method(s.method),
		Force:     s.force,
		Published: images.Published(),
		Base:      s.base,
		Mirror:    s.mirror,
		Network:   s.network,
		Host:      setup.HostBuild(wd, out),
		Out:       out,
	})
	if err != nil {
		return 1, err
	}
	fmt.Fprintf(out, "setup: ready: %s %s by %s\n", s.image, shortID(res.ID), res.Step)
	// The manifest's packages, if it declares any, are a derived image of
	// that one: make it too, as `runbox images build` would.
	m, _, err := manifest.LoadDefault(cfg.manifestPath)
	if err != nil {
		return 1, fmt.Errorf("the manifest: %w", err)
	}
	if len(derived.Plan(m)) > 0 {
		built, err := derived.Build(ctx, derived.Options{Manifest: m, Out: out})
		if err != nil {
			return 1, fmt.Errorf("the manifest's packages: %w", err)
		}
		for _, r := range built {
			fmt.Fprintf(out, "setup: packages: %s %s: %s\n", r.Tag, shortID(r.ID), derived.Summary(r.Packages))
		}
	}
	fmt.Fprintln(out, "setup: check everything with `runbox doctor`, then add runbox to your client with `runbox config claude-desktop --write`")
	return 0, nil
}

// shortID is an id, digest or hash cut to 19 characters (a digest's
// sha256: and 12 hex digits).
func shortID(id string) string {
	if len(id) > 19 {
		return id[:19]
	}
	return id
}
