package images

import (
	"archive/tar"
	"bytes"
	"encoding/json"
	"errors"
	"io"
	"io/fs"
	"path"
	"sort"
	"strings"
)

// Image is the tag runbox's default manifest runs and `runbox setup` makes
// available.
const Image = "runbox/sandbox:bookworm"

// DebianBase is the Debian image the engine-side build starts from: it only
// provides debootstrap, which then builds the box's tree from Debian's
// packages (sandbox/Dockerfile). Pinned by digest, so the build is the same
// wherever it runs.
const DebianBase = "debian:bookworm-20251229-slim@sha256:d5d3f9c23164ea16f31852f95bd5959aad1c5e854332fe00f7b3a20fcc9f635c"

// Labels of the sandbox image and of its build.
const (
	// ImageLabel marks an image built from this recipe ("sandbox").
	ImageLabel = "io.runbox.image"
	// BuildLabel marks the intermediate images of one engine-side build,
	// so that they are removed after it.
	BuildLabel = "io.runbox.setup-build"
)

// published is the sandbox image the release published for this recipe,
// pinned by digest ("ghcr.io/runbox-mcp/sandbox@sha256:…"); empty in builds
// that pin none. Set by the linker:
// -X github.com/runbox-mcp/runbox/images.published=REF@sha256:DIGEST
var published string

// Published is the published sandbox image this binary pins, by digest;
// "" when it pins none.
func Published() string { return published }

// BuildContext is the engine-side build's context: the files under
// sandbox/ (the Dockerfile, rootfs.sh, the package lists, prune.py and the
// Python helpers) as a tar stream, in a fixed order with fixed times, so
// the same recipe is the same context.
func BuildContext() ([]byte, error) {
	var names []string
	err := fs.WalkDir(recipe, "sandbox", func(p string, d fs.DirEntry, err error) error {
		if err == nil && !d.IsDir() {
			names = append(names, p)
		}
		return err
	})
	if err != nil {
		return nil, err
	}
	sort.Strings(names)
	var buf bytes.Buffer
	tw := tar.NewWriter(&buf)
	dirs := map[string]bool{}
	for _, name := range names {
		rel := strings.TrimPrefix(name, "sandbox/")
		for d := path.Dir(rel); d != "." && !dirs[d]; d = path.Dir(d) {
			dirs[d] = true
			if err := tw.WriteHeader(&tar.Header{Typeflag: tar.TypeDir, Name: d + "/", Mode: 0o755, Format: tar.FormatPAX}); err != nil {
				return nil, err
			}
		}
		b, err := recipe.ReadFile(name)
		if err != nil {
			return nil, err
		}
		mode := int64(0o644)
		if strings.HasSuffix(rel, ".sh") {
			mode = 0o755
		}
		if err := tw.WriteHeader(&tar.Header{Typeflag: tar.TypeReg, Name: rel, Mode: mode, Size: int64(len(b)), Format: tar.FormatPAX}); err != nil {
			return nil, err
		}
		if _, err := tw.Write(b); err != nil {
			return nil, err
		}
	}
	if err := tw.Close(); err != nil {
		return nil, err
	}
	return buf.Bytes(), nil
}

// Files returns the recipe's files (build.sh and everything under
// sandbox/), by their path under images/, for a host-side build outside a
// checkout.
func Files() (map[string][]byte, error) {
	out := map[string][]byte{}
	err := fs.WalkDir(recipe, ".", func(p string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		b, err := recipe.ReadFile(p)
		out[p] = b
		return err
	})
	return out, err
}

// ReadMessages reads the engine's JSON message stream (pull or build),
// handing each line of output to progress; an error message is the
// result.
func ReadMessages(r io.Reader, progress func(string)) error {
	dec := json.NewDecoder(r)
	for {
		var msg struct {
			Stream      string `json:"stream"`
			Status      string `json:"status"`
			ID          string `json:"id"`
			Error       string `json:"error"`
			ErrorDetail *struct {
				Message string `json:"message"`
			} `json:"errorDetail"`
		}
		if err := dec.Decode(&msg); err == io.EOF {
			return nil
		} else if err != nil {
			return err
		}
		switch {
		case msg.ErrorDetail != nil && msg.ErrorDetail.Message != "":
			return errors.New(msg.ErrorDetail.Message)
		case msg.Error != "":
			return errors.New(msg.Error)
		}
		text := msg.Stream
		if text == "" {
			text = strings.TrimSpace(msg.ID + " " + msg.Status)
		}
		for _, line := range strings.Split(strings.TrimRight(text, "\n"), "\n") {
			if progress != nil {
				progress(strings.TrimRight(line, "\r"))
			}
		}
	}
}
