//go:build linux

package boxinit

import (
	"bytes"
	"context"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/hashicorp/yamux"
	"github.com/runbox-mcp/runbox/internal/initproto"
)

// The test binary doubles as the trampoline, as runbox-init does in a box.
func TestMain(m *testing.M) {
	if len(os.Args) > 1 && os.Args[1] == trampolineArg {
		os.Exit(trampoline(os.Args[2:]))
	}
	if os.Getenv(signalTargetEnv) != "" {
		os.Exit(signalTarget())
	}
	os.Exit(m.Run())
}

func bashJob(t *testing.T, code string) *initproto.Job {
	t.Helper()
	dir := t.TempDir()
	return &initproto.Job{
		Argv:             []string{"bash", filepath.Join(dir, "main.sh")},
		Dir:              dir,
		CodePath:         filepath.Join(dir, "main.sh"),
		Code:             []byte(code),
		Env:              []string{"PATH=/usr/local/bin:/usr/bin:/bin"},
		TimeoutMs:        60000, // generous: a loaded machine is slow
		MaxOutputBytes:   1 << 16,
		MaxArtifacts:     10,
		MaxArtifactBytes: 1 << 20,
	}
}

func runJob(t *testing.T, job *initproto.Job) (*initproto.Report, [][]byte) {
	t.Helper()
	rep, contents := Run(context.Background(), job, Options{Self: os.Args[0], CgroupRoot: t.TempDir(), Scratch: []string{}})
	if rep.InitError != "" {
		t.Fatalf("init error: %s", rep.InitError)
	}
	return rep, contents
}

func TestRunStdinFilesAndArtifacts(t *testing.T) {
	job := bashJob(t, `
read name
echo "hello $name"
echo oops >&2
cat data/in.txt
echo changed > data/changed.txt
mkdir -p out && printf 'png?' > out/plot.png
mkdir -p node_modules/left-pad out/node_modules && echo '{}' > node_modules/left-pad/package.json && echo x > out/node_modules/index.js
ln -s /etc/passwd out/link
env | sort > out/env.txt
exit 3`)
	job.Stdin = []byte("world\n")
	job.Files = []initproto.File{
		{Path: "data/in.txt", Data: []byte("input file\n")},
		{Path: "data/changed.txt", Data: []byte("before\n")},
	}
	rep, contents := runJob(t, job)
	if rep.ExitCode != 3 || rep.Signal != 0 || rep.TimedOut {
		t.Fatalf("exit %d signal %d timedOut %v; stderr %s", rep.ExitCode, rep.Signal, rep.TimedOut, rep.Stderr)
	}
	if got := string(rep.Stdout); got != "hello world\ninput file\n" {
		t.Errorf("stdout %q", got)
	}
	if got := string(rep.Stderr); got != "oops\n" {
		t.Errorf("stderr %q", got)
	}
	var paths []string
	for _, a := range rep.Artifacts {
		paths = append(paths, a.Path)
	}
	if got, want := strings.Join(paths, ","), "data/changed.txt,out/env.txt,out/plot.png"; got != want {
		t.Fatalf("artifacts %s, want %s (unchanged inputs, the code, symlinks and installed packages are not artifacts)", got, want)
	}
	if len(contents) != 3 || string(contents[2]) != "png?" || !rep.Artifacts[2].Sent || rep.Artifacts[2].Size != 4 {
		t.Errorf("artifact content: %q %+v", contents, rep.Artifacts)
	}
	if env := string(contents[1]); strings.Contains(env, "HOME=") || !strings.Contains(env, "PATH=/usr/local/bin") {
		t.Errorf("environment is not exactly the job's:\n%s", env)
	}
}

func TestRunTimeoutKillsEvenWhenSignalsAreIgnored(t *testing.T) {
	// The deadline leaves time for bash to start on a loaded machine; the
	// run must end soon after it, whatever the program ignores.
	job := bashJob(t, `trap '' TERM INT HUP; (trap '' TERM; sleep 100) & echo started; while :; do :; done`)
	job.TimeoutMs = 3000
	done := make(chan *initproto.Report, 1)
	go func() {
		rep, _ := Run(context.Background(), job, Options{Self: os.Args[0], CgroupRoot: t.TempDir(), Scratch: []string{}})
		done <- rep
	}()
	var rep *initproto.Report
	select {
	case rep = <-done:
	case <-time.After(60 * time.Second):
		t.Fatal("the run outlived its 3 s deadline by a minute")
	}
	if !rep.TimedOut || rep.Signal != int(syscall.SIGKILL) || string(rep.Stdout) != "started\n" {
		t.Fatalf("report %+v", rep)
	}
	// The spinner's CPU time is counted; how much of the deadline it
	// gets depends on what else the machine runs.
	if rep.WallMs < job.TimeoutMs || rep.CPUMs < 20 {
		t.Errorf("wall %d ms cpu %d ms", rep.WallMs, rep.CPUMs)
	}
}

func TestRunKillsBackgroundProcesses(t *testing.T) {
	marker := filepath.Join(t.TempDir(), "alive")
	job := bashJob(t, `(sleep 3; touch `+marker+`) & echo bye`)
	rep, _ := runJob(t, job)
	if rep.ExitCode != 0 || string(rep.Stdout) != "bye\n" {
		t.Fatalf("report %+v", rep)
	}
	time.Sleep(4 * time.Second)
	if _, err := os.Stat(marker); err == nil {
		t.Fatal("a background process outlived the run")
	}
}

func TestRunCapsOutputFloods(t *testing.T) {
	job := bashJob(t, `head -c 5000000 /dev/zero | tr '\0' x; echo; echo TAIL`)
	job.MaxOutputBytes = 1000
	rep, _ := runJob(t, job)
	if !rep.StdoutTruncated || rep.StdoutBytes != 5000006 || !strings.HasSuffix(string(rep.Stdout), "TAIL\n") || len(rep.Stdout) > 1100 {
		t.Fatalf("stdout %d bytes kept of %d, truncated %v", len(rep.Stdout), rep.StdoutBytes, rep.StdoutTruncated)
	}
}

func TestRunMissingInterpreter(t *testing.T) {
	job := bashJob(t, "true")
	job.Argv = []string{"no-such-interpreter", job.CodePath}
	rep, _ := runJob(t, job)
	if !strings.Contains(rep.StartError, "no-such-interpreter") {
		t.Fatalf("start error %q", rep.StartError)
	}
}

func TestRunCheckRejectsBeforeRunning(t *testing.T) {
	job := bashJob(t, "echo ran\nif then\n")
	job.Check = []string{"bash", "-n", job.CodePath}
	rep, _ := runJob(t, job)
	if !rep.CheckFailed || len(rep.Stdout) != 0 || !strings.Contains(string(rep.Stderr), "line 2") {
		t.Fatalf("report %+v stderr %s", rep, rep.Stderr)
	}
}

func TestRunCPULimit(t *testing.T) {
	job := bashJob(t, `while :; do :; done`)
	job.CPUSeconds = 1
	rep, _ := runJob(t, job)
	if rep.TimedOut || (rep.Signal != int(syscall.SIGXCPU) && rep.Signal != int(syscall.SIGKILL)) {
		t.Fatalf("report %+v", rep)
	}
}

func TestUnpackRefusesEscapes(t *testing.T) {
	for _, p := range []string{"../x", "/etc/x", "a/../../x"} {
		job := bashJob(t, "true")
		job.Files = []initproto.File{{Path: p, Data: []byte("x")}}
		rep, _ := Run(context.Background(), job, Options{Self: os.Args[0], CgroupRoot: t.TempDir()})
		if rep.InitError == "" {
			t.Errorf("%s: accepted", p)
		}
	}
}

// oneOffBox is runbox-init's one-off side of the channel over pipes that
// behave like an engine's attach: a new attach sees the box's output from
// then on, and the old one ends.
type oneOffBox struct {
	t    *testing.T
	inW  *io.PipeWriter
	w    *initproto.ResetWriter
	att  *attachments
	done chan int
}

func startOneOff(t *testing.T) *oneOffBox { return startOneOffWith(t, nil) }

// startOneOffWith starts a one-off box with relay rl (nil: none).
func startOneOffWith(t *testing.T, rl *relay) *oneOffBox {
	inR, inW := io.Pipe()
	b := &oneOffBox{t: t, inW: inW, w: initproto.NewResetWriter(inW), att: &attachments{}, done: make(chan int, 1)}
	go func() {
		b.done <- serve(inR, b.att, Options{Self: os.Args[0], CgroupRoot: t.TempDir(), Scratch: []string{}, Relay: rl})
	}()
	t.Cleanup(func() { _ = inW.Close() })
	return b
}

// connect opens a channel as the server does over a new attach.
func (b *oneOffBox) connect(nonce byte, first bool) *yamux.Session {
	b.t.Helper()
	out := b.att.attach()
	return openChannel(b.t, b.w, out, out, nonce, first)
}

// openChannel opens a channel as the server does: a reset on w (the first
// one without padding, its multiplexer's bytes right behind it), the
// box's answer awaited on out, and a multiplexer session over the two
// that closes c.
func openChannel(t *testing.T, w *initproto.ResetWriter, out io.Reader, c io.Closer, nonce byte, first bool) *yamux.Session {
	t.Helper()
	n := bytes.Repeat([]byte{nonce}, initproto.NonceSize)
	go func() {
		if first {
			_ = w.Start(n)
		} else {
			_ = w.Reset(n)
		}
	}()
	r, err := initproto.AwaitAck(out, n, 1<<20)
	if err != nil {
		t.Fatal(err)
	}
	sess, err := yamux.Client(struct {
		io.Reader
		io.Writer
		io.Closer
	}{r, w, c}, initproto.MuxConfig())
	if err != nil {
		t.Fatal(err)
	}
	return sess
}

func (b *oneOffBox) exited(within time.Duration) int {
	b.t.Helper()
	select {
	case code := <-b.done:
		return code
	case <-time.After(within):
		b.t.Fatalf("runbox-init did not exit within %s", within)
		return -1
	}
}

// collectRun opens a stream of kind (a job's or a collect) and reads the
// report and the artifacts it names.
func collectRun(t *testing.T, sess *yamux.Session, h initproto.Header, job *initproto.Job) (*initproto.Report, []string, error) {
	t.Helper()
	st, err := sess.OpenStream()
	if err != nil {
		t.Fatal(err)
	}
	go func() {
		if job != nil {
			_ = initproto.SendJob(st, job)
		} else {
			_ = initproto.Send(st, h)
		}
	}()
	rep, err := initproto.ReceiveReport(st, 1<<20)
	if err != nil {
		return nil, nil, err
	}
	var arts []string
	for _, a := range rep.Artifacts {
		if !a.Sent {
			continue
		}
		st, err := sess.AcceptStream()
		if err != nil {
			return nil, nil, err
		}
		var ah initproto.Header
		blobs, err := initproto.Receive(st, &ah, 1<<20)
		if err != nil || ah.Kind != initproto.StreamArtifact || len(blobs) != 1 {
			t.Fatalf("artifact %+v %v", ah, err)
		}
		arts = append(arts, string(blobs[0]))
	}
	return rep, arts, nil
}

// TestServeChannel drives runbox-init's side of the channel as the server
// does: a job stream answered by its report, then one stream per artifact;
// the server's End lets the box exit at once.
func TestServeChannel(t *testing.T) {
	if _, err := exec.LookPath("bash"); err != nil {
		t.Skip("no bash")
	}
	t.Run("a job, its report and its artifact", func(t *testing.T) {
		b := startOneOff(t)
		sess := b.connect(1, true)
		rep, arts, err := collectRun(t, sess, initproto.Header{}, bashJob(t, "printf out; printf 'bin\\000ary' > a.bin"))
		if err != nil || string(rep.Stdout) != "out" || len(arts) != 1 || arts[0] != "bin\x00ary" {
			t.Fatalf("report %+v %q %v", rep, arts, err)
		}
		_ = b.w.End()
		if code := b.exited(10 * time.Second); code != 0 {
			t.Fatalf("exit %d", code)
		}
	})
	t.Run("a stream that is not a job", func(t *testing.T) {
		b := startOneOff(t)
		sess := b.connect(1, true)
		rep, _, err := collectRun(t, sess, initproto.Header{Kind: "nonsense"}, nil)
		if err != nil || !strings.Contains(rep.InitError, "reading job") {
			t.Fatalf("report %+v, %v", rep, err)
		}
		_ = b.w.End()
		b.exited(10 * time.Second)
	})
}

// startKeptJob sends, on the first channel, a job run id that runs a
// second after it started, then prints done and makes the artifact
// out.txt (kept), and returns once it has started.
func startKeptJob(t *testing.T, first *yamux.Session, id string) {
	t.Helper()
	job := bashJob(t, "touch started; sleep 1; echo done; printf kept > out.txt")
	job.RunID = id
	st, err := first.OpenStream()
	if err != nil {
		t.Fatal(err)
	}
	if err := initproto.SendJob(st, job); err != nil {
		t.Fatal(err)
	}
	waitForFile(t, filepath.Join(job.Dir, "started"))
}

// TestOneOffReportOutlivesItsChannel: the server that sent a job dies (its
// channel breaks mid-frame); the job runs on, and a restarted server's
// channel collects its report and artifacts by run id, as the first would
// have had them.
func TestOneOffReportOutlivesItsChannel(t *testing.T) {
	if _, err := exec.LookPath("bash"); err != nil {
		t.Skip("no bash")
	}
	b := startOneOff(t)
	startKeptJob(t, b.connect(1, true), "r_outlives")
	// The server dies half-way through a frame; a new one attaches.
	_, _ = b.inW.Write([]byte{0xA5, 0x10, 0x00, 'p', 'a', 'r', 't'})
	second := b.connect(2, false)
	if _, _, err := collectRun(t, second, initproto.Header{Kind: initproto.StreamCollect, Run: "r_other"}, nil); err == nil {
		t.Fatal("another run's collect was answered")
	}
	rep, arts, err := collectRun(t, second, initproto.Header{Kind: initproto.StreamCollect, Run: "r_outlives"}, nil)
	if err != nil || string(rep.Stdout) != "done\n" || rep.ExitCode != 0 || len(arts) != 2 || arts[0] != "kept" {
		t.Fatalf("collected %+v %q %v", rep, arts, err)
	}
	// A second job is not run: the box runs one.
	if _, _, err := collectRun(t, second, initproto.Header{}, bashJob(t, "echo again")); err == nil {
		t.Fatal("a second job was answered")
	}
	_ = b.w.End()
	if code := b.exited(10 * time.Second); code != 0 {
		t.Fatalf("exit %d", code)
	}
}

// TestOneOffExitsWhenNobodyCollects: a report no server collects is kept
// for the job's KeepMs after its end, then the box exits.
func TestOneOffExitsWhenNobodyCollects(t *testing.T) {
	if _, err := exec.LookPath("bash"); err != nil {
		t.Skip("no bash")
	}
	b := startOneOff(t)
	sess := b.connect(1, true)
	job := bashJob(t, "echo done")
	job.RunID, job.KeepMs = "r_nobody", 300
	st, err := sess.OpenStream()
	if err != nil {
		t.Fatal(err)
	}
	if err := initproto.SendJob(st, job); err != nil {
		t.Fatal(err)
	}
	_ = sess.Close() // the server dies without reading
	go func() { _, _ = io.Copy(io.Discard, b.att.attach()) }()
	if code := b.exited(30 * time.Second); code != 0 {
		t.Fatalf("exit %d", code)
	}
}

func TestPrewarmThreadsLeavesSpareThreads(t *testing.T) {
	threads := func() int {
		b, _ := os.ReadFile("/proc/self/status")
		for _, l := range strings.Split(string(b), "\n") {
			if n, ok := strings.CutPrefix(l, "Threads:"); ok {
				v, _ := strconv.Atoi(strings.TrimSpace(n))
				return v
			}
		}
		return 0
	}
	before := threads()
	prewarmThreads(spareThreads)
	if after := threads(); after < spareThreads || after < before {
		t.Fatalf("%d threads after prewarming (%d before), want at least %d", after, before, spareThreads)
	}
}

// TestStartedOutputIsNeverLost: a program started for its job that prints
// and exits before runbox-init looks again (a loaded machine) must have
// all of its output in the report. Here the program has ended, and its
// pipes are drained, before supervise begins.
func TestStartedOutputIsNeverLost(t *testing.T) {
	job := bashJob(t, "unused")
	r := newChildReaper()
	defer r.stop()
	res := newRunResult(job)
	p, err := start(r, os.Args[0], []string{"bash", "-c", "echo out; echo err >&2"}, job.Env, job.Dir, 0, 0, false, res.stdout, res.stderr)
	if err != nil {
		t.Fatal(err)
	}
	<-r.mainDone
	p.readers.Wait()
	res = p.supervise(context.Background(), r, job, res, nil, time.Minute, nil)
	out, _, _ := res.stdout.bytes()
	errs, _, _ := res.stderr.bytes()
	if string(out) != "out\n" || string(errs) != "err\n" || res.exitCode != 0 {
		t.Fatalf("stdout %q, stderr %q, exit %d; want \"out\\n\", \"err\\n\", 0", out, errs, res.exitCode)
	}
}

// TestPrestartedOutputIsNeverLost: a prestarted interpreter that prints
// at once when it is handed the code's path must have all of it in the
// report (the capture must be open before the path is sent).
func TestPrestartedOutputIsNeverLost(t *testing.T) {
	for i := range 100 {
		job := bashJob(t, "unused")
		r := newChildReaper()
		pre, err := start(r, os.Args[0], []string{"bash", "-c", `read -r path <&4; echo "ran $path"`}, job.Env, job.Dir, 0, 0, true, nil, nil)
		if err != nil {
			t.Fatal(err)
		}
		rep, _ := Run(context.Background(), job, Options{Self: os.Args[0], CgroupRoot: t.TempDir(), Scratch: []string{}, ChildReaper: r, Prestarted: pre})
		if want := "ran " + job.CodePath + "\n"; string(rep.Stdout) != want {
			t.Fatalf("run %d: stdout %q, want %q", i, rep.Stdout, want)
		}
	}
}

// TestUnpackWrites writes the job's files and code where they belong,
// making their directories, replacing a session's earlier files whole
// and refusing what it must: a file twice in a fresh box, a path through
// a file, a link at the path.
func TestUnpackWrites(t *testing.T) {
	dir := t.TempDir()
	job := &initproto.Job{Dir: dir, CodePath: filepath.Join(dir, "main.py"), Code: []byte("print(1)"),
		Files: []initproto.File{{Path: "a/b/in.csv", Data: []byte("x,y\n")}, {Path: "top.txt", Data: []byte("top")}}}
	inputs, err := unpack(job, false)
	if err != nil {
		t.Fatal(err)
	}
	for rel, want := range map[string]string{"main.py": "print(1)", "a/b/in.csv": "x,y\n", "top.txt": "top"} {
		if b, err := os.ReadFile(filepath.Join(dir, rel)); err != nil || string(b) != want {
			t.Errorf("%s: %q, %v; want %q", rel, b, err, want)
		}
		if inputs[rel] != sha256hex([]byte(want)) {
			t.Errorf("%s: input hash %q", rel, inputs[rel])
		}
	}
	if _, err := unpack(job, false); err == nil || !strings.Contains(err.Error(), "writing") {
		t.Errorf("a fresh box's file written twice: %v", err)
	}
	// A session's next call replaces what is there, longer or not.
	job.Code, job.Files = []byte("1"), []initproto.File{{Path: "a/b/in.csv", Data: []byte("z")}}
	if _, err := unpack(job, true); err != nil {
		t.Fatal(err)
	}
	for rel, want := range map[string]string{"main.py": "1", "a/b/in.csv": "z"} {
		if b, _ := os.ReadFile(filepath.Join(dir, rel)); string(b) != want {
			t.Errorf("%s replaced: %q, want %q", rel, b, want)
		}
	}
	job.Files = []initproto.File{{Path: "top.txt/x", Data: []byte("x")}}
	if _, err := unpack(job, true); err == nil || !strings.Contains(err.Error(), "creating directory for") {
		t.Errorf("a path through a file: %v", err)
	}
	outside := filepath.Join(t.TempDir(), "target")
	if err := os.WriteFile(outside, []byte("keep"), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink(outside, filepath.Join(dir, "link.txt")); err != nil {
		t.Fatal(err)
	}
	job.Files = []initproto.File{{Path: "link.txt", Data: []byte("x")}}
	if _, err := unpack(job, true); err == nil {
		t.Error("a link at a file's path was followed")
	}
	if b, _ := os.ReadFile(outside); string(b) != "keep" {
		t.Errorf("the link's target was written: %q", b)
	}
}

// A gVisor session box (Restorable) keeps its stdin blocking; any other
// box, session or not, reads it through the poller.
func TestRestorable(t *testing.T) {
	spec := initproto.Session{Driver: "python", Interpreter: "python3"}
	if restorable([]string{"runbox-init", initproto.SessionFlag, initproto.EncodeSession(spec)}) {
		t.Error("a session box that is not restorable")
	}
	spec.Restorable = true
	if !restorable([]string{"runbox-init", initproto.SessionFlag, initproto.EncodeSession(spec)}) {
		t.Error("a restorable session box")
	}
	args, relayed := withoutRelayFlag([]string{"runbox-init", initproto.RelayFlag, initproto.SessionFlag, initproto.EncodeSession(spec)})
	if !relayed || !restorable(args) {
		t.Error("a restorable session box with a relay")
	}
	if args, relayed := withoutRelayFlag([]string{"runbox-init", initproto.SessionFlag, "x"}); relayed || len(args) != 3 {
		t.Errorf("no relay flag: %q %v", args, relayed)
	}
	for _, args := range [][]string{{"runbox-init"}, {"runbox-init", initproto.PrestartFlag, "x"}, {"runbox-init", initproto.SessionFlag, "not base64!"}} {
		if restorable(args) {
			t.Errorf("%q is restorable", args)
		}
	}
}
