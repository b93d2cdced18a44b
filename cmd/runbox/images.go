package main

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"time"

	"github.com/runbox-mcp/runbox/images/derived"
	"github.com/runbox-mcp/runbox/manifest"
	"github.com/runbox-mcp/runbox/sandbox"
)

const imagesHelp = `Usage: runbox images build [--force] [--json] [--manifest FILE]

Builds the derived sandbox image of the manifest's packages: FROM the languages' image, one layer
holding exactly the declared packages and what they need. Python packages are Debian's python3-*
packages, resolved with apt-get on this machine against the base image's own package list and
downloaded from Debian's mirror (RUNBOX_DEBIAN_MIRROR, else this machine's); JavaScript packages come
from the npm registry with a generated package-lock (integrity checked) and go to /node_modules. The
image is tagged runbox/sandbox-packages:<hash of the base image's recipe and the list> and labelled
with every package's version and hash (sha256 of each .deb, npm's integrity). When that tag exists on
the current base image nothing is done. Resolutions are kept in the user's cache directory, so the
same build again needs no network. runbox serve, run and doctor then use the derived image.
`

// runImages is `runbox images build`.
func runImages(ctx context.Context, cfg config, m *manifest.Manifest, loadErr error) (int, error) {
	if loadErr != nil {
		return 2, loadErr
	}
	start := time.Now()
	res, err := derived.Build(ctx, derived.Options{Manifest: m, Force: cfg.imagesForce, Out: os.Stderr})
	if errors.Is(err, derived.ErrNoPackages) {
		fmt.Fprintln(os.Stderr, "images: the manifest declares no packages: nothing to build")
		if cfg.jsonOut {
			return 0, printJSON([]derived.Result{})
		}
		return 0, nil
	}
	if err != nil {
		return 1, err
	}
	if cfg.jsonOut {
		return 0, printJSON(res)
	}
	for _, r := range res {
		what := "up to date"
		if r.Built {
			what = "built"
		}
		fmt.Fprintf(os.Stderr, "images: %s %s (%s) for %v in %s: %s\n", r.Tag, what, shortID(r.ID), r.Languages, time.Since(start).Round(10*time.Millisecond), derived.Summary(r.Packages))
	}
	return 0, nil
}

// warnDerived says at start-up when a derived image the manifest needs
// is not on the engine: runs would fail until it is built.
func warnDerived(ctx context.Context, r *sandbox.BoxRunner, imgs []derived.Image, logger *slog.Logger) {
	for _, im := range imgs {
		if _, err := r.ImageDigest(ctx, im.Tag); err != nil {
			logger.Error("the derived image of the manifest's packages is not available: run `runbox images build`", "image", im.Tag, "base", im.Base, "err", err)
		}
	}
}
