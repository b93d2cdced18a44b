package sandbox

import (
	"context"
	"os"
	"sync"
	"testing"
	"time"

	"github.com/runbox-mcp/runbox/contract"
)

// memDriver is a fake driver that keeps memory: a checkpoint writes an
// image, a restore starts a new session box from it once the image is
// there; restores past the first wait for hold, when set.
type memDriver struct {
	*fakeSessionDriver
	mu       sync.Mutex
	restores int
	hold     chan struct{}
	noImage  []string
}

func (d *memDriver) KeepsMemory() bool { return true }

func (d *memDriver) Checkpoint(_ context.Context, _, dir string) error {
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return err
	}
	return os.WriteFile(dir+"/checkpoint.img", []byte("image"), 0o600)
}

func (d *memDriver) Restore(ctx context.Context, spec BoxSpec, dir string) (Box, error) {
	d.mu.Lock()
	d.restores++
	n, hold := d.restores, d.hold
	d.mu.Unlock()
	if n > 1 && hold != nil {
		<-hold
	}
	if _, err := os.Stat(dir + "/checkpoint.img"); err != nil {
		d.mu.Lock()
		d.noImage = append(d.noImage, err.Error())
		d.mu.Unlock()
	}
	return d.fakeSessionDriver.Start(ctx, spec)
}

func memRunner(t *testing.T) (*memDriver, *BoxRunner, SessionRequest) {
	t.Helper()
	d := &memDriver{fakeSessionDriver: &fakeSessionDriver{}, hold: make(chan struct{})}
	m := testManifest(t, nil)
	r := newTestRunnerOf(t, d, &d.fakeDriver, m)
	lang, _ := m.Language("python")
	return d, r, SessionRequest{Language: lang, Client: "c", Limits: m.SessionLimits()}
}

// TestForkAnswersBeforeTheOriginal: a fork is answered once its own box
// is restored; the original, restored after it from the same image, takes
// no call until it is back, then answers.
func TestForkAnswersBeforeTheOriginal(t *testing.T) {
	ctx := context.Background()
	d, r, req := memRunner(t)
	info, fail := r.OpenSession(ctx, req)
	if fail != nil {
		t.Fatal(fail)
	}
	forked := make(chan *contract.ErrorInfo, 1)
	go func() {
		ri, fail := r.ForkSession(ctx, info.ID, "c")
		if fail == nil && (ri.Restored != contract.RestoredMemory || ri.Session.ID == info.ID) {
			t.Errorf("fork: %+v", ri)
		}
		forked <- fail
	}()
	select {
	case fail := <-forked:
		if fail != nil {
			t.Fatal(fail)
		}
	case <-time.After(10 * time.Second):
		close(d.hold)
		t.Fatal("the fork waited for the original's restore")
	}
	job := testJob(t, r.m, time.Second)
	job.Code = "x = 1"
	ran := make(chan contract.Result, 1)
	go func() { ran <- r.RunInSession(ctx, info.ID, "c", RunRequest{Job: job}) }()
	select {
	case res := <-ran:
		t.Fatalf("the original ran a call before it was back: %+v", res)
	case <-time.After(200 * time.Millisecond):
	}
	close(d.hold)
	if res := <-ran; res.Status != contract.StatusOK {
		t.Fatalf("the original after its fork: %+v %+v", res, res.Error)
	}
	if len(d.noImage) > 0 {
		t.Fatalf("a restore found no image: %v", d.noImage)
	}
}

// TestForkOriginalBackAfterClose: the server closes while the original of
// a fork is still being restored; Close waits for it, and the box it was
// restored into goes too (the cleanup counts every box removed).
func TestForkOriginalBackAfterClose(t *testing.T) {
	ctx := context.Background()
	d, r, req := memRunner(t)
	info, fail := r.OpenSession(ctx, req)
	if fail != nil {
		t.Fatal(fail)
	}
	go func() {
		time.Sleep(300 * time.Millisecond)
		close(d.hold)
	}()
	if _, fail := r.ForkSession(ctx, info.ID, "c"); fail != nil {
		t.Fatal(fail)
	}
}
