package setup

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"
)

const recipe = "00203c306312a9a9"

// fakeEngine is an engine with images in a map; its pull and build do what
// the test says.
type fakeEngine struct {
	mu     sync.Mutex
	images map[string]fakeImage // by name and by ID
	calls  []string
	pull   func(ctx context.Context, ref string, progress func(string)) error
	build  func(ctx context.Context, req BuildRequest, progress func(string)) error
	nextID int
}

type fakeImage struct {
	id, recipe string
	labels     map[string]string
}

func newFake() *fakeEngine { return &fakeEngine{images: map[string]fakeImage{}} }

func (f *fakeEngine) add(name, recipe string, labels map[string]string) string {
	f.nextID++
	id := fmt.Sprintf("sha256:%064d", f.nextID)
	img := fakeImage{id: id, recipe: recipe, labels: labels}
	f.images[id] = img
	if name != "" {
		f.images[name] = img
	}
	return id
}

func (f *fakeEngine) record(s string) {
	f.mu.Lock()
	f.calls = append(f.calls, s)
	f.mu.Unlock()
}

func (f *fakeEngine) Recipe(_ context.Context, ref string) (string, string, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	img, ok := f.images[ref]
	if !ok {
		return "", "", ErrNoImage
	}
	return img.id, img.recipe, nil
}

func (f *fakeEngine) Pull(ctx context.Context, ref string, progress func(string)) error {
	f.record("pull " + ref)
	if f.pull == nil {
		return errors.New("no registry")
	}
	return f.pull(ctx, ref, progress)
}

func (f *fakeEngine) Build(ctx context.Context, req BuildRequest, progress func(string)) error {
	f.record("build " + req.Tag + " from " + req.BuildArgs["BASE"])
	if f.build == nil {
		f.mu.Lock()
		f.add(req.Tag, req.BuildArgs["RECIPE"], nil)
		f.mu.Unlock()
		return nil
	}
	return f.build(ctx, req, progress)
}

func (f *fakeEngine) Tag(_ context.Context, src, dst string) error {
	f.record("tag " + src + " " + dst)
	f.mu.Lock()
	defer f.mu.Unlock()
	img, ok := f.images[src]
	if !ok {
		return ErrNoImage
	}
	f.images[dst] = img
	return nil
}

func (f *fakeEngine) Remove(_ context.Context, ref string) error {
	f.record("remove " + ref)
	f.mu.Lock()
	defer f.mu.Unlock()
	img, ok := f.images[ref]
	if !ok {
		return ErrNoImage
	}
	for k, v := range f.images {
		if v.id == img.id {
			delete(f.images, k)
		}
	}
	return nil
}

func (f *fakeEngine) RemoveLabelled(_ context.Context, key, value string) (int, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	n := 0
	for k, v := range f.images {
		if v.labels[key] == value && k == v.id {
			delete(f.images, k)
			n++
		}
	}
	return n, nil
}

func (f *fakeEngine) did(prefix string) bool {
	f.mu.Lock()
	defer f.mu.Unlock()
	return slices.ContainsFunc(f.calls, func(c string) bool { return strings.HasPrefix(c, prefix) })
}

const published = "ghcr.io/runbox-mcp/sandbox@sha256:aaaa"

func opts() Options {
	return Options{Image: "runbox/sandbox:bookworm", Recipe: recipe, Base: "debian:bookworm@sha256:bbbb", Stall: 200 * time.Millisecond}
}

func TestPlan(t *testing.T) {
	for _, tc := range []struct {
		name      string
		method    Method
		published string
		force     bool
		have      string
		want      []Step
		err       string
	}{
		{"auto, current", MethodAuto, published, false, recipe, []Step{StepCurrent}, ""},
		{"auto, absent, pinned", MethodAuto, published, false, "", []Step{StepPull, StepEngine}, ""},
		{"auto, absent, nothing pinned", MethodAuto, "", false, "", []Step{StepEngine}, ""},
		{"auto, older recipe", "", published, false, "0000000000000000", []Step{StepPull, StepEngine}, ""},
		{"auto, current, forced", MethodAuto, "", true, recipe, []Step{StepEngine}, ""},
		{"pull, current", MethodPull, published, false, recipe, []Step{StepCurrent}, ""},
		{"pull, absent", MethodPull, published, false, "", []Step{StepPull}, ""},
		{"pull, nothing pinned", MethodPull, "", false, "", nil, "pins no published"},
		{"engine", MethodEngine, published, false, "", []Step{StepEngine}, ""},
		{"engine, current", MethodEngine, published, false, recipe, []Step{StepCurrent}, ""},
		{"host", MethodHost, published, false, "", []Step{StepHost}, ""},
		{"host, forced", MethodHost, published, true, recipe, []Step{StepHost}, ""},
		{"unknown", "registry", published, false, "", nil, "unknown method"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			o := opts()
			o.Method, o.Published, o.Force = tc.method, tc.published, tc.force
			got, err := Plan(o, tc.have)
			if tc.err != "" {
				if err == nil || !strings.Contains(err.Error(), tc.err) {
					t.Fatalf("err %v, want %q", err, tc.err)
				}
				return
			}
			if err != nil || !slices.Equal(got, tc.want) {
				t.Fatalf("Plan = %v, %v; want %v", got, err, tc.want)
			}
		})
	}
}

// An image with the current recipe: nothing is pulled or built.
func TestRunCurrentDoesNothing(t *testing.T) {
	f := newFake()
	o := opts()
	o.Published = published
	id := f.add(o.Image, recipe, nil)
	res, err := Run(context.Background(), f, o)
	if err != nil || res.Step != StepCurrent || res.ID != id {
		t.Fatalf("Run = %+v, %v", res, err)
	}
	if len(f.calls) != 0 {
		t.Fatalf("calls: %v", f.calls)
	}
}

// No registry (the pull fails at once, as here): the engine build follows,
// and the pull's failure is said.
func TestRunPullFailsThenEngineBuild(t *testing.T) {
	f := newFake()
	f.add("debian:bookworm@sha256:bbbb", "", nil)
	o := opts()
	o.Published = published
	var out strings.Builder
	o.Out = &out
	res, err := Run(context.Background(), f, o)
	if err != nil || res.Step != StepEngine {
		t.Fatalf("Run = %+v, %v\n%s", res, err, &out)
	}
	if len(res.Skipped) != 1 || !strings.Contains(res.Skipped[0], "no registry") {
		t.Fatalf("skipped: %q", res.Skipped)
	}
	if !f.did("pull "+published) || !f.did("build runbox/sandbox:bookworm from debian:bookworm@sha256:bbbb") {
		t.Fatalf("calls: %v", f.calls)
	}
	if !strings.Contains(out.String(), "trying the next way") {
		t.Fatalf("output does not say the pull failed:\n%s", &out)
	}
}

// A registry that never answers (a black-holed network): the pull is
// abandoned after the stall period, not after the engine's own timeouts.
func TestRunPullStallsFallsThroughFast(t *testing.T) {
	f := newFake()
	f.add("debian:bookworm@sha256:bbbb", "", nil)
	f.pull = func(ctx context.Context, ref string, progress func(string)) error {
		<-ctx.Done()
		return ctx.Err()
	}
	o := opts()
	o.Published = published
	start := time.Now()
	res, err := Run(context.Background(), f, o)
	if err != nil || res.Step != StepEngine {
		t.Fatalf("Run = %+v, %v", res, err)
	}
	if took := time.Since(start); took > 2*time.Second {
		t.Fatalf("took %s with a stall period of %s", took, o.Stall)
	}
	if !strings.Contains(res.Skipped[0], "no progress") {
		t.Fatalf("skipped: %q", res.Skipped)
	}
}

// A slow pull that keeps reporting progress is not abandoned.
func TestRunPullSlowButAlive(t *testing.T) {
	f := newFake()
	f.pull = func(ctx context.Context, ref string, progress func(string)) error {
		for range 6 {
			select {
			case <-ctx.Done():
				return ctx.Err()
			case <-time.After(80 * time.Millisecond):
				progress("Downloading")
			}
		}
		f.mu.Lock()
		f.add(ref, recipe, nil)
		f.mu.Unlock()
		return nil
	}
	o := opts()
	o.Published = published
	res, err := Run(context.Background(), f, o)
	if err != nil || res.Step != StepPull {
		t.Fatalf("Run = %+v, %v (calls %v)", res, err, f.calls)
	}
	if !f.did("tag " + published + " runbox/sandbox:bookworm") {
		t.Fatalf("not tagged: %v", f.calls)
	}
	if f.did("build") {
		t.Fatalf("built after a good pull: %v", f.calls)
	}
}

// A published image of another recipe is not used, and is removed again.
func TestRunPulledWrongRecipe(t *testing.T) {
	f := newFake()
	f.add("debian:bookworm@sha256:bbbb", "", nil)
	f.pull = func(ctx context.Context, ref string, progress func(string)) error {
		f.mu.Lock()
		f.add(ref, "ffffffffffffffff", nil)
		f.mu.Unlock()
		return nil
	}
	o := opts()
	o.Published = published
	res, err := Run(context.Background(), f, o)
	if err != nil || res.Step != StepEngine {
		t.Fatalf("Run = %+v, %v", res, err)
	}
	if !strings.Contains(res.Skipped[0], `recipe "ffffffffffffffff"`) || !f.did("remove "+published) {
		t.Fatalf("skipped %q, calls %v", res.Skipped, f.calls)
	}
	if f.did("tag") {
		t.Fatalf("tagged a wrong image: %v", f.calls)
	}
}

// Only a digest is pinned: a published tag is refused.
func TestRunPullNeedsDigest(t *testing.T) {
	f := newFake()
	o := opts()
	o.Method, o.Published = MethodPull, "ghcr.io/runbox-mcp/sandbox:latest"
	if _, err := Run(context.Background(), f, o); err == nil || !strings.Contains(err.Error(), "not pinned by digest") {
		t.Fatalf("err %v", err)
	}
	if f.did("pull") {
		t.Fatalf("pulled: %v", f.calls)
	}
}

// No base and no registry: the error says what works instead.
func TestRunEngineBuildWithoutBase(t *testing.T) {
	f := newFake()
	o := opts()
	o.Method = MethodEngine
	_, err := Run(context.Background(), f, o)
	if err == nil || !strings.Contains(err.Error(), "--method host") || !strings.Contains(err.Error(), "--base") {
		t.Fatalf("err %v", err)
	}
	if f.did("build") {
		t.Fatalf("built without a base: %v", f.calls)
	}
}

// The build's intermediate images go; the image it replaces goes; the
// base stays.
func TestRunEngineBuildCleansUp(t *testing.T) {
	f := newFake()
	baseID := f.add("debian:bookworm@sha256:bbbb", "", nil)
	oldID := f.add("runbox/sandbox:bookworm", "0000000000000000", nil)
	var stage []string
	f.build = func(ctx context.Context, req BuildRequest, progress func(string)) error {
		f.mu.Lock()
		defer f.mu.Unlock()
		a := f.add("", "", map[string]string{"io.runbox.setup-build": req.BuildArgs["RUNBOX_SETUP_BUILD"]})
		b := f.add("", "", nil)
		stage = []string{a, b}
		for _, l := range []string{"Step 1/4 : ARG BASE", "Step 2/4 : FROM ${BASE} AS rootfs", " ---> " + baseID[7:19],
			"Step 3/4 : RUN x", " ---> Running in 0123456789ab", " ---> " + b[7:], "Step 4/4 : FROM scratch"} {
			progress(l)
		}
		delete(f.images, b)
		f.images[b[7:]] = fakeImage{id: b}
		f.add(req.Tag, req.BuildArgs["RECIPE"], nil)
		return nil
	}
	o := opts()
	res, err := Run(context.Background(), f, o)
	if err != nil || res.Step != StepEngine {
		t.Fatalf("Run = %+v, %v", res, err)
	}
	for _, id := range stage {
		if _, ok := f.images[id]; ok {
			t.Errorf("intermediate image %s left", id)
		}
	}
	if _, ok := f.images[stage[1][7:]]; ok {
		t.Errorf("reported intermediate image %s left", stage[1][7:])
	}
	if _, ok := f.images[oldID]; ok {
		t.Error("the replaced image is left")
	}
	if _, ok := f.images[baseID]; !ok {
		t.Error("the base was removed")
	}
}

// A build that fails is an error naming the step; nothing is tagged.
func TestRunEngineBuildFails(t *testing.T) {
	f := newFake()
	f.add("debian:bookworm@sha256:bbbb", "", nil)
	f.build = func(ctx context.Context, req BuildRequest, progress func(string)) error {
		return errors.New("The command '/bin/sh -c bash /recipe/rootfs.sh' returned a non-zero code: 1")
	}
	_, err := Run(context.Background(), f, opts())
	if err == nil || !strings.Contains(err.Error(), "engine build: The command") {
		t.Fatalf("err %v", err)
	}
}

// A build that tags an image of the wrong recipe is caught.
func TestRunEngineBuildWrongLabel(t *testing.T) {
	f := newFake()
	f.add("debian:bookworm@sha256:bbbb", "", nil)
	f.build = func(ctx context.Context, req BuildRequest, progress func(string)) error {
		f.mu.Lock()
		defer f.mu.Unlock()
		f.add(req.Tag, "", nil)
		return nil
	}
	_, err := Run(context.Background(), f, opts())
	if err == nil || !strings.Contains(err.Error(), "carries recipe") {
		t.Fatalf("err %v", err)
	}
}

func TestRunHost(t *testing.T) {
	f := newFake()
	o := opts()
	o.Method = MethodHost
	o.Host = func(ctx context.Context, image string) error {
		f.add(image, recipe, nil)
		return nil
	}
	res, err := Run(context.Background(), f, o)
	if err != nil || res.Step != StepHost {
		t.Fatalf("Run = %+v, %v", res, err)
	}
}

// Output of Docker 20.10's classic builder for images/sandbox/Dockerfile
// (abridged): the first stage's images are found, the base and the last
// stage's are not.
func TestStageImages(t *testing.T) {
	out := strings.Split(`Step 1/13 : ARG BASE
Step 2/13 : FROM ${BASE} AS rootfs
 ---> fb8f6d87d134
Step 3/13 : ARG RUNBOX_DEBIAN_MIRROR=
 ---> Running in 2b1d0f0c9a77
Removing intermediate container 2b1d0f0c9a77
 ---> 647978694cfc
Step 5/13 : LABEL io.runbox.setup-build=${RUNBOX_SETUP_BUILD}
 ---> Running in 5a3c
 ---> 3b3726c92cac
Step 8/13 : RUN mkdir /rootfs /logs
images: debootstrap took 98s
 ---> e84654f46c4e
Step 9/13 : FROM scratch
 ---> 
Step 10/13 : ARG RECIPE
 ---> 8b0d5400d4f5
Step 13/13 : WORKDIR /workspace
 ---> bc846e938989
Successfully built bc846e938989`, "\n")
	got := stageImages(out)
	want := []string{"647978694cfc", "3b3726c92cac", "e84654f46c4e"}
	if !slices.Equal(got, want) {
		t.Fatalf("stageImages = %v, want %v", got, want)
	}
}

func TestIsStep(t *testing.T) {
	for l, want := range map[string]bool{
		"Step 2/13 : FROM ${BASE} AS rootfs":             true,
		"STEP 2/7: ARG RUNBOX_DEBIAN_MIRROR=":            true,
		"[1/2] STEP 1/7: FROM localhost/x:y AS rootfs":   true,
		" ---> 3b3726c92cac":                             false,
		"images: debootstrap took 98s":                   false,
		"[2/2] COMMIT localhost/runbox-test/sandbox:try": false,
	} {
		if isStep(l) != want {
			t.Errorf("isStep(%q) = %v", l, !want)
		}
	}
}
