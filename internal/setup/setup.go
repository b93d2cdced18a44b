package setup

import (
	"context"
	"errors"
	"fmt"
	"io"
	"strings"
	"time"

	"github.com/runbox-mcp/runbox/images"
)

// Method is how the image is made available.
type Method string

// Methods. Auto tries the current image, a pull, then an engine build.
const (
	MethodAuto   Method = "auto"
	MethodPull   Method = "pull"
	MethodEngine Method = "engine"
	MethodHost   Method = "host"
)

// Methods lists every Method, for flags and messages.
var Methods = []Method{MethodAuto, MethodPull, MethodEngine, MethodHost}

// Options say what to make available and how.
type Options struct {
	// Image is the tag to make available (images.Image).
	Image string
	// Recipe is the recipe hash the image must carry (images.RecipeHash()).
	Recipe string
	// Method is how; "" is MethodAuto.
	Method Method
	// Force rebuilds (or pulls) even when the image is current.
	Force bool
	// Published is the pinned published image ("ref@sha256:…"); "" for none.
	Published string
	// Base is the Debian image the engine build starts from
	// (images.DebianBase, or a local stand-in).
	Base string
	// Mirror is the Debian mirror for the engine build; "" for the base's.
	Mirror string
	// Network is the engine build's network mode; "" for the engine's default.
	Network string
	// Stall aborts a pull when the engine reports nothing for this long
	// (default 30 s), so an unreachable registry falls through quickly.
	Stall time.Duration
	// Host runs the host build (images/build.sh) for MethodHost.
	Host func(ctx context.Context, image string) error
	// Out receives progress lines; nil discards them.
	Out io.Writer
}

// Engine is what setup needs of the engine; engine.go implements it over
// the Engine API, the tests with a fake.
type Engine interface {
	// Recipe returns the image's ID and its recipe label; ErrNoImage when
	// the engine has no such image.
	Recipe(ctx context.Context, ref string) (id, recipe string, err error)
	// Pull pulls ref, calling progress for each message of the engine's.
	Pull(ctx context.Context, ref string, progress func(string)) error
	// Build builds req, calling progress for each line of the build's output.
	Build(ctx context.Context, req BuildRequest, progress func(string)) error
	// Tag gives the image src the name dst.
	Tag(ctx context.Context, src, dst string) error
	// Remove removes an image (by ID or name) and its untagged parents,
	// leaving it when a container uses it.
	Remove(ctx context.Context, ref string) error
	// RemoveLabelled removes the untagged images with label key=value.
	RemoveLabelled(ctx context.Context, key, value string) (int, error)
}

// BuildRequest is one engine-side build.
type BuildRequest struct {
	Context   []byte
	Tag       string
	BuildArgs map[string]string
	Network   string
}

// ErrNoImage says the engine has no such image.
var ErrNoImage = errors.New("no such image")

// Step is one way of making the image available.
type Step string

// Steps, in the order auto tries them.
const (
	StepCurrent Step = "current"
	StepPull    Step = "pull"
	StepEngine  Step = "engine build"
	StepHost    Step = "host build"
)

// Result says what setup did.
type Result struct {
	// Step is the way that made the image available.
	Step Step `json:"step"`
	// ID is the image's ID.
	ID string `json:"id"`
	// Skipped are the ways tried before, each with why it did not work.
	Skipped []string `json:"skipped,omitempty"`
	// Took is how long it took.
	Took time.Duration `json:"took_ns"`
}

// Plan is the ways to try, in order, given the image's current recipe
// label ("" when it is absent or has none).
func Plan(o Options, have string) ([]Step, error) {
	current := have != "" && have == o.Recipe && !o.Force
	switch o.Method {
	case "", MethodAuto:
		if current {
			return []Step{StepCurrent}, nil
		}
		if o.Published != "" {
			return []Step{StepPull, StepEngine}, nil
		}
		return []Step{StepEngine}, nil
	case MethodPull:
		if current {
			return []Step{StepCurrent}, nil
		}
		if o.Published == "" {
			return nil, errors.New("this runbox pins no published sandbox image (a development build): use --method engine or host")
		}
		return []Step{StepPull}, nil
	case MethodEngine:
		if current {
			return []Step{StepCurrent}, nil
		}
		return []Step{StepEngine}, nil
	case MethodHost:
		if current {
			return []Step{StepCurrent}, nil
		}
		return []Step{StepHost}, nil
	}
	return nil, fmt.Errorf("unknown method %q: use %s", o.Method, joinMethods())
}

func joinMethods() string {
	var s []string
	for _, m := range Methods {
		s = append(s, string(m))
	}
	return strings.Join(s, ", ")
}

// Run makes o.Image available on e and says how.
func Run(ctx context.Context, e Engine, o Options) (Result, error) {
	start := time.Now()
	if o.Image == "" {
		o.Image = images.Image
	}
	if o.Recipe == "" {
		o.Recipe = images.RecipeHash()
	}
	if o.Base == "" {
		o.Base = images.DebianBase
	}
	if o.Stall <= 0 {
		o.Stall = 30 * time.Second
	}
	prevID, have, err := e.Recipe(ctx, o.Image)
	switch {
	case errors.Is(err, ErrNoImage):
		prevID = ""
	case err != nil:
		return Result{}, fmt.Errorf("inspect %s: %w", o.Image, err)
	}
	steps, err := Plan(o, have)
	if err != nil {
		return Result{}, err
	}
	if steps[0] == StepEngine && o.Published == "" && (o.Method == "" || o.Method == MethodAuto) {
		o.logf("this runbox pins no published image (a development build): building it inside the engine")
	}
	res := Result{}
	for i, step := range steps {
		var err error
		switch step {
		case StepCurrent:
			o.logf("%s is up to date (recipe %s)", o.Image, have)
			return Result{Step: StepCurrent, ID: prevID, Took: time.Since(start)}, nil
		case StepPull:
			err = pull(ctx, e, o)
		case StepEngine:
			err = engineBuild(ctx, e, o)
		case StepHost:
			if o.Host == nil {
				err = errors.New("no host build in this runbox")
			} else {
				err = o.Host(ctx, o.Image)
			}
		}
		if err == nil {
			err = checkRecipe(ctx, e, o)
		}
		if err != nil {
			if ctx.Err() != nil || i == len(steps)-1 {
				if len(res.Skipped) > 0 {
					return res, fmt.Errorf("%s: %w (before: %s)", step, err, strings.Join(res.Skipped, "; "))
				}
				return res, fmt.Errorf("%s: %w", step, err)
			}
			o.logf("%s did not work: %v; trying the next way", step, err)
			res.Skipped = append(res.Skipped, fmt.Sprintf("%s: %v", step, err))
			continue
		}
		res.Step = step
		res.ID, _, _ = e.Recipe(ctx, o.Image)
		if prevID != "" && prevID != res.ID {
			// The image this one replaces, now untagged: removed unless a
			// container still uses it.
			_ = e.Remove(ctx, prevID)
		}
		res.Took = time.Since(start)
		o.logf("%s ready by %s in %s (recipe %s)", o.Image, step, res.Took.Round(time.Second), o.Recipe)
		return res, nil
	}
	return res, errors.New("nothing to try")
}

// checkRecipe verifies that the image now tagged carries this recipe.
func checkRecipe(ctx context.Context, e Engine, o Options) error {
	_, got, err := e.Recipe(ctx, o.Image)
	if err != nil {
		return fmt.Errorf("after the build, %s: %w", o.Image, err)
	}
	if got != o.Recipe {
		return fmt.Errorf("%s carries recipe %q, this runbox's recipe is %s", o.Image, got, o.Recipe)
	}
	return nil
}

func (o Options) logf(format string, args ...any) {
	if o.Out != nil {
		fmt.Fprintf(o.Out, "setup: "+format+"\n", args...)
	}
}
