package setup

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"regexp"
	"strings"
	"time"

	"github.com/runbox-mcp/runbox/images"
)

// engineBuild builds the image inside the engine from the embedded recipe
// (images/sandbox/Dockerfile), then removes the build's intermediate
// images.
func engineBuild(ctx context.Context, e Engine, o Options) error {
	if _, _, err := e.Recipe(ctx, o.Base); errors.Is(err, ErrNoImage) {
		o.logf("pulling the Debian base %s", o.Base)
		if err := watched(ctx, o.Stall, func(ctx context.Context, alive func(string)) error {
			return e.Pull(ctx, o.Base, alive)
		}); err != nil {
			return fmt.Errorf("the engine cannot pull the Debian base %s (%v): without a registry, build on a Linux host with `runbox setup --method host`, or give a local Debian bookworm image with --base", o.Base, err)
		}
	} else if err != nil {
		return err
	}
	bctx, err := images.BuildContext()
	if err != nil {
		return err
	}
	id := buildID()
	req := BuildRequest{
		Context: bctx,
		Tag:     o.Image,
		Network: o.Network,
		BuildArgs: map[string]string{
			"BASE":                 o.Base,
			"RECIPE":               o.Recipe,
			"RUNBOX_DEBIAN_MIRROR": o.Mirror,
			"RUNBOX_SETUP_BUILD":   id,
		},
	}
	o.logf("building %s inside the engine from %s (debootstrap of Debian bookworm, a few minutes)", o.Image, o.Base)
	start := time.Now()
	var lines []string
	err = e.Build(ctx, req, func(line string) {
		lines = append(lines, line)
		// The recipe's own progress lines; the rest is in the engine's log.
		if strings.HasPrefix(line, "images: ") || isStep(line) {
			o.logf("  %s", line)
		}
	})
	// The rootfs stage's images (~1 GB) are of no further use: those the
	// build reported, newest first, then any left with the build's label.
	cctx := context.WithoutCancel(ctx)
	n := 0
	stage := stageImages(lines)
	for i := len(stage) - 1; i >= 0; i-- {
		if e.Remove(cctx, stage[i]) == nil {
			n++
		}
	}
	for range 20 {
		k, rerr := e.RemoveLabelled(cctx, images.BuildLabel, id)
		n += k
		if rerr != nil {
			o.logf("could not remove the build's intermediate images (label %s=%s): %v", images.BuildLabel, id, rerr)
		}
		if k == 0 || rerr != nil {
			break
		}
	}
	if n > 0 {
		o.logf("removed %d intermediate images of the build", n)
	}
	if err != nil {
		o.logf("the end of the build's output:")
		for _, l := range lines[max(0, len(lines)-25):] {
			o.logf("  | %s", l)
		}
		return err
	}
	o.logf("built %s in %s", o.Image, time.Since(start).Round(time.Second))
	return nil
}

func buildID() string {
	b := make([]byte, 8)
	_, _ = rand.Read(b)
	return hex.EncodeToString(b)
}

// imageLine is the builder's report of a step's image: " ---> 3b3726c92cac"
// (Docker's classic builder) or "--> 3b3726c92ca" (Podman).
var imageLine = regexp.MustCompile(`^\s*-{2,3}> ([0-9a-f]{10,64})\s*$`)

// stageImages are the images a multi-stage build made in its stages before
// the last one, from its output: the images reported after each FROM but
// the first (the stage's base), up to the last FROM. None of them is part
// of the final image.
func stageImages(lines []string) []string {
	var froms []int
	for i, l := range lines {
		if isStep(l) && strings.Contains(strings.ToUpper(l), " FROM ") {
			froms = append(froms, i)
		}
	}
	var out []string
	for k := 0; k+1 < len(froms); k++ {
		base := true
		for _, l := range lines[froms[k]+1 : froms[k+1]] {
			m := imageLine.FindStringSubmatch(l)
			if m == nil {
				continue
			}
			if base {
				base = false
				continue
			}
			out = append(out, m[1])
		}
	}
	return out
}

// isStep says whether a line of build output starts a step: "Step 2/13 :"
// (Docker), "STEP 2/13:" or "[1/2] STEP 2/7:" (Podman).
func isStep(l string) bool {
	if strings.HasPrefix(l, "[") {
		if _, rest, ok := strings.Cut(l, "] "); ok {
			l = rest
		}
	}
	return strings.HasPrefix(l, "Step ") || strings.HasPrefix(l, "STEP ")
}
