package docker

import (
	"archive/tar"
	"bufio"
	"context"
	"encoding/binary"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/moby/moby/api/types/container"
	"github.com/moby/moby/api/types/events"
	"github.com/moby/moby/api/types/system"
	"github.com/moby/moby/api/types/volume"

	"github.com/runbox-mcp/runbox/manifest"
	"github.com/runbox-mcp/runbox/sandbox"
)

// fakeEngine is a Docker Engine API server on 127.0.0.1 that answers the
// requests the driver makes as Docker 20.10 (API 1.41) does: the same
// paths, status codes, error bodies ({"message": ...}), the wait answer's
// header sent before the exit, and the attach stream hijacked after a
// "101 UPGRADED" and multiplexed (stdout and stderr frames). Tests play the
// box's side: they read what the driver wrote on its stdin, write its
// output, end it (an exit code, an OOM kill) or take it away.
type fakeEngine struct {
	t   *testing.T
	srv *httptest.Server

	mu      sync.Mutex
	log     []string // "METHOD /path" of every request, without the version prefix
	boxes   map[string]*fakeBox
	created []*fakeBox // every box ever created, in order
	volumes map[string]volume.Volume
	images  map[string]string // reference → ID
	events  []events.Message  // oom events the engine saw
	next    int
	podman  bool
	runsc   bool // the engine has gVisor's runtime
	// fail answers a request key ("create", "start", "remove",
	// "inspect", "attach", "update") with a status and a message, for its
	// next n requests (n < 0: always).
	fail map[string]fakeFailure
	// hold blocks requests of a key until the request is cancelled.
	hold    map[string]bool
	closing chan struct{} // closed at the test's end: held requests return
}

type fakeFailure struct {
	status int
	msg    string
	n      int
}

// fakeBox is a container on the fake engine.
type fakeBox struct {
	id      string
	name    string
	raw     map[string]any // the create request as sent
	req     container.CreateRequest
	state   container.ContainerState
	oom     bool
	code    int
	exited  chan struct{} // closed at the box's exit
	conn    net.Conn      // the attach stream's server side
	stdin   *bufio.Reader
	updates []container.UpdateConfig
	files   map[string][]byte // copied in through the archive endpoint
	kills   []string          // signals
	created time.Time
}

func newFakeEngine(t *testing.T) *fakeEngine {
	t.Helper()
	e := &fakeEngine{t: t, boxes: map[string]*fakeBox{}, volumes: map[string]volume.Volume{},
		images: map[string]string{}, fail: map[string]fakeFailure{}, hold: map[string]bool{}, closing: make(chan struct{})}
	for _, l := range manifest.Default().Languages {
		e.images[l.Image] = "sha256:" + strings.Repeat("ab", 32)
	}
	e.srv = httptest.NewServer(http.HandlerFunc(e.serve))
	t.Cleanup(func() {
		close(e.closing)
		e.mu.Lock()
		for _, b := range e.boxes {
			if b.conn != nil {
				b.conn.Close()
			}
		}
		e.mu.Unlock()
		e.srv.CloseClientConnections()
		e.srv.Close()
	})
	return e
}

// host is the engine's address for DOCKER_HOST.
func (e *fakeEngine) host() string { return "tcp://" + e.srv.Listener.Addr().String() }

// newDocker is a driver on the fake engine, through New (the client from
// the environment, with API version negotiation), and ready.
func newDocker(t *testing.T, e *fakeEngine, edit func(*manifest.Manifest)) *Docker {
	t.Helper()
	t.Setenv("DOCKER_HOST", e.host())
	t.Setenv("DOCKER_TLS_VERIFY", "")
	t.Setenv("DOCKER_API_VERSION", "")
	t.Setenv("XDG_CACHE_HOME", t.TempDir()) // Podman's seccomp files
	m := manifest.Default()
	if edit != nil {
		edit(m)
	}
	if err := m.Validate(); err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, "runbox-init-linux-amd64"), []byte("#!runbox-init\n"), 0o755); err != nil {
		t.Fatal(err)
	}
	d, err := New(Options{Manifest: m, InitDir: dir}, sandbox.CurrentOwner())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { d.Close() })
	if err := d.Ready(context.Background()); err != nil {
		t.Fatalf("Ready on the fake engine: %v", err)
	}
	return d
}

func (e *fakeEngine) failNext(key string, status int, msg string, n int) {
	e.mu.Lock()
	defer e.mu.Unlock()
	e.fail[key] = fakeFailure{status, msg, n}
}

func (e *fakeEngine) holdAll(key string) {
	e.mu.Lock()
	defer e.mu.Unlock()
	e.hold[key] = true
}

// count is how many requests were "METHOD /path-prefix...".
func (e *fakeEngine) count(prefix string) int {
	e.mu.Lock()
	defer e.mu.Unlock()
	n := 0
	for _, l := range e.log {
		if strings.HasPrefix(l, prefix) {
			n++
		}
	}
	return n
}

func (e *fakeEngine) requests() []string {
	e.mu.Lock()
	defer e.mu.Unlock()
	return append([]string{}, e.log...)
}

func (e *fakeEngine) box(id string) *fakeBox {
	e.mu.Lock()
	defer e.mu.Unlock()
	return e.boxes[id]
}

// boxCount is how many containers the engine holds.
func (e *fakeEngine) boxCount() int {
	e.mu.Lock()
	defer e.mu.Unlock()
	return len(e.boxes)
}

// exit ends a running box: its process exits with code (137 and oom: its
// memory cgroup killed it), its attach stream ends, waits answer.
func (e *fakeEngine) exit(id string, code int, oom bool) {
	e.mu.Lock()
	defer e.mu.Unlock()
	e.exitLocked(e.boxes[id], code, oom)
}

func (e *fakeEngine) exitLocked(b *fakeBox, code int, oom bool) {
	if b == nil || b.state != container.StateRunning {
		return
	}
	b.state, b.code, b.oom = container.StateExited, code, oom
	if b.conn != nil {
		b.conn.Close()
	}
	close(b.exited)
}

// vanish removes a box behind the driver's back (`docker rm -f`).
func (e *fakeEngine) vanish(id string) {
	e.mu.Lock()
	defer e.mu.Unlock()
	e.exitLocked(e.boxes[id], 137, false)
	delete(e.boxes, id)
}

// oomEvent records the engine's "oom" event for a box.
func (e *fakeEngine) oomEvent(id string) {
	e.mu.Lock()
	defer e.mu.Unlock()
	now := time.Now()
	e.events = append(e.events, events.Message{Type: events.ContainerEventType, Action: events.ActionOOM,
		Actor: events.Actor{ID: id}, Scope: "local", Time: now.Unix(), TimeNano: now.UnixNano()})
}

func writeJSON(w http.ResponseWriter, status int, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	_ = json.NewEncoder(w).Encode(v)
}

func writeError(w http.ResponseWriter, status int, msg string) {
	writeJSON(w, status, map[string]string{"message": msg})
}

func (e *fakeEngine) serve(w http.ResponseWriter, r *http.Request) {
	w.Header().Set("Api-Version", "1.41")
	w.Header().Set("Server", "Docker/20.10.24 (linux)")
	w.Header().Set("Ostype", "linux")
	path := r.URL.Path
	if path == "/_ping" {
		e.record(r.Method + " /_ping")
		w.Header().Set("Content-Type", "text/plain; charset=utf-8")
		_, _ = io.WriteString(w, "OK")
		return
	}
	// The client negotiated 1.41 from /_ping: every other path carries it.
	rest, ok := strings.CutPrefix(path, "/v1.41")
	if !ok {
		e.t.Errorf("request %s %s without the negotiated API version", r.Method, path)
		writeError(w, http.StatusBadRequest, "client version not negotiated")
		return
	}
	e.record(r.Method + " " + rest)
	parts := strings.Split(strings.Trim(rest, "/"), "/")
	key, id := routeKey(r.Method, parts)
	if e.failed(w, key) {
		return
	}
	e.mu.Lock()
	hold := e.hold[key]
	e.mu.Unlock()
	if hold {
		// Read the request first: only then does the server notice the
		// client going away.
		_, _ = io.Copy(io.Discard, r.Body)
		select {
		case <-r.Context().Done():
		case <-e.closing:
		}
		return
	}
	switch key {
	case "info":
		writeJSON(w, 200, e.info())
	case "version":
		writeJSON(w, 200, e.version())
	case "volume-inspect":
		e.mu.Lock()
		v, ok := e.volumes[id]
		e.mu.Unlock()
		if !ok {
			writeError(w, 404, "get "+id+": no such volume")
			return
		}
		writeJSON(w, 200, v)
	case "volume-create":
		var body volume.CreateRequest
		_ = json.NewDecoder(r.Body).Decode(&body)
		v := volume.Volume{Name: body.Name, Driver: "local", Labels: body.Labels, Options: body.DriverOpts,
			Mountpoint: "/var/lib/docker/volumes/" + body.Name + "/_data", Scope: "local", CreatedAt: time.Now().Format(time.RFC3339)}
		e.mu.Lock()
		if old, ok := e.volumes[body.Name]; ok {
			v = old // the engine answers an existing volume
		}
		e.volumes[body.Name] = v
		e.mu.Unlock()
		writeJSON(w, 201, v)
	case "volume-remove":
		e.mu.Lock()
		_, ok := e.volumes[id]
		delete(e.volumes, id)
		e.mu.Unlock()
		if !ok {
			writeError(w, 404, "get "+id+": no such volume")
			return
		}
		w.WriteHeader(204)
	case "volume-list":
		var out []volume.Volume
		e.mu.Lock()
		for _, v := range e.volumes {
			if matchLabels(r, v.Labels) {
				out = append(out, v)
			}
		}
		e.mu.Unlock()
		writeJSON(w, 200, volume.ListResponse{Volumes: out, Warnings: []string{}})
	case "create":
		e.create(w, r)
	case "list":
		e.list(w, r)
	case "image-inspect":
		ref := strings.TrimSuffix(strings.TrimPrefix(rest, "/images/"), "/json")
		e.mu.Lock()
		imgID, ok := e.images[ref]
		e.mu.Unlock()
		if !ok {
			writeError(w, 404, "No such image: "+ref)
			return
		}
		writeJSON(w, 200, map[string]any{"Id": imgID, "RepoTags": []string{ref}, "Config": map[string]any{"Labels": map[string]string{"org.runbox.image": "x"}}})
	case "events":
		e.eventsAnswer(w, r)
	default:
		e.container(w, r, key, id)
	}
}

func (e *fakeEngine) record(s string) {
	e.mu.Lock()
	e.log = append(e.log, s)
	e.mu.Unlock()
}

func (e *fakeEngine) failed(w http.ResponseWriter, key string) bool {
	e.mu.Lock()
	f, ok := e.fail[key]
	if ok && f.n > 0 {
		f.n--
		if f.n == 0 {
			delete(e.fail, key)
		} else {
			e.fail[key] = f
		}
	}
	e.mu.Unlock()
	if !ok {
		return false
	}
	writeError(w, f.status, f.msg)
	return true
}

// routeKey names a request by what it asks, and its object.
func routeKey(method string, p []string) (key, id string) {
	switch {
	case p[0] == "info":
		return "info", ""
	case p[0] == "version":
		return "version", ""
	case p[0] == "events":
		return "events", ""
	case p[0] == "images" && method == http.MethodGet:
		return "image-inspect", ""
	case p[0] == "volumes" && len(p) == 1 && method == http.MethodGet:
		return "volume-list", ""
	case p[0] == "volumes" && len(p) == 2 && p[1] == "create":
		return "volume-create", ""
	case p[0] == "volumes" && len(p) == 2 && method == http.MethodGet:
		return "volume-inspect", p[1]
	case p[0] == "volumes" && len(p) == 2 && method == http.MethodDelete:
		return "volume-remove", p[1]
	case p[0] == "containers" && len(p) == 2 && p[1] == "create":
		return "create", ""
	case p[0] == "containers" && len(p) == 2 && p[1] == "json":
		return "list", ""
	case p[0] == "containers" && len(p) == 2 && method == http.MethodDelete:
		return "remove", p[1]
	case p[0] == "containers" && len(p) == 3 && p[2] == "json":
		return "inspect", p[1]
	case p[0] == "containers" && len(p) == 3:
		return p[2], p[1] // attach, wait, start, kill, update, archive, rename
	}
	return "unknown", ""
}

func (e *fakeEngine) info() system.Info {
	runtimes := map[string]system.RuntimeWithStatus{"runc": {Runtime: system.Runtime{Path: "runc"}}}
	info := system.Info{ID: "fake", ServerVersion: "20.10.24", Architecture: "x86_64", OSType: "linux",
		OperatingSystem: "Debian GNU/Linux 12 (bookworm)", KernelVersion: "6.1.0", CgroupVersion: "2", CgroupDriver: "systemd",
		DefaultRuntime: "runc", Runtimes: runtimes, RuncCommit: system.Commit{ID: "v1.1.5"}}
	e.mu.Lock()
	defer e.mu.Unlock()
	if e.podman {
		info.RuncCommit = system.Commit{} // Podman names its runtime's build in /version
	}
	if e.runsc {
		info.Runtimes["runsc"] = system.RuntimeWithStatus{Runtime: system.Runtime{Path: "/usr/local/bin/runsc"}}
	}
	return info
}

func (e *fakeEngine) version() system.VersionResponse {
	e.mu.Lock()
	defer e.mu.Unlock()
	if e.podman {
		return system.VersionResponse{Version: "4.3.1", APIVersion: "1.41", Components: []system.ComponentVersion{
			{Name: "Podman Engine", Version: "4.3.1"}, {Name: "OCI Runtime (runc)", Version: "runc version 1.1.5\ncommit: 1.1.5+ds1-1+deb12u1\nspec: 1.0.2-dev"}}}
	}
	return system.VersionResponse{Version: "20.10.24", APIVersion: "1.41", MinAPIVersion: "1.12",
		Components: []system.ComponentVersion{{Name: "Engine", Version: "20.10.24"}, {Name: "runc", Version: "1.1.5"}}}
}

// matchLabels applies the request's label filters (label=k or k=v).
func matchLabels(r *http.Request, labels map[string]string) bool {
	f := filtersOf(r)
	for l := range f["label"] {
		k, v, hasV := strings.Cut(l, "=")
		got, ok := labels[k]
		if !ok || hasV && got != v {
			return false
		}
	}
	return true
}

func filtersOf(r *http.Request) map[string]map[string]bool {
	f := map[string]map[string]bool{}
	if s := r.URL.Query().Get("filters"); s != "" {
		_ = json.Unmarshal([]byte(s), &f)
	}
	return f
}

func (e *fakeEngine) create(w http.ResponseWriter, r *http.Request) {
	body, _ := io.ReadAll(r.Body)
	var raw map[string]any
	var req container.CreateRequest
	if err := json.Unmarshal(body, &raw); err != nil {
		writeError(w, 400, err.Error())
		return
	}
	_ = json.Unmarshal(body, &req)
	if req.Config == nil || req.HostConfig == nil {
		writeError(w, 400, "config and host config are required")
		return
	}
	e.mu.Lock()
	defer e.mu.Unlock()
	if _, ok := e.images[req.Image]; !ok {
		writeError(w, 404, "No such image: "+req.Image)
		return
	}
	e.next++
	id := fmt.Sprintf("%064x", e.next)
	b := &fakeBox{id: id, name: r.URL.Query().Get("name"), raw: raw, req: req, state: container.StateCreated,
		exited: make(chan struct{}), files: map[string][]byte{}, created: time.Now()}
	e.boxes[id] = b
	e.created = append(e.created, b)
	writeJSON(w, 201, container.CreateResponse{ID: id, Warnings: []string{}})
}

func (e *fakeEngine) list(w http.ResponseWriter, r *http.Request) {
	all := r.URL.Query().Get("all") == "1"
	f := filtersOf(r)
	out := []container.Summary{}
	e.mu.Lock()
	for _, b := range e.boxes {
		if !all && b.state != container.StateRunning || !matchLabels(r, b.req.Labels) {
			continue
		}
		if st := f["status"]; len(st) > 0 && !st[string(b.state)] {
			continue
		}
		if vols := f["volume"]; len(vols) > 0 {
			uses := false
			for _, m := range b.req.HostConfig.Mounts {
				uses = uses || vols[m.Source]
			}
			if !uses {
				continue
			}
		}
		var names []string
		if b.name != "" {
			names = []string{"/" + b.name}
		}
		out = append(out, container.Summary{ID: b.id, Names: names, Image: b.req.Image, Labels: b.req.Labels, State: b.state, Created: b.created.Unix()})
	}
	e.mu.Unlock()
	writeJSON(w, 200, out)
}

// eventsAnswer streams the recorded events of the filtered containers and
// kinds, then ends, as the engine does for an until in the past.
func (e *fakeEngine) eventsAnswer(w http.ResponseWriter, r *http.Request) {
	f := filtersOf(r)
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(200)
	e.mu.Lock()
	evs := append([]events.Message{}, e.events...)
	e.mu.Unlock()
	enc := json.NewEncoder(w)
	for _, ev := range evs {
		if c := f["container"]; len(c) > 0 && !c[ev.Actor.ID] {
			continue
		}
		if k := f["event"]; len(k) > 0 && !k[string(ev.Action)] {
			continue
		}
		_ = enc.Encode(ev)
	}
}

func (e *fakeEngine) container(w http.ResponseWriter, r *http.Request, key, id string) {
	e.mu.Lock()
	b := e.boxes[id]
	e.mu.Unlock()
	if b == nil {
		msg := "No such container: " + id
		if key == "kill" {
			msg = "Cannot kill container: " + id + ": " + msg
		}
		writeError(w, 404, msg)
		return
	}
	switch key {
	case "attach":
		e.attach(w, r, b)
	case "wait":
		e.wait(w, r, b)
	case "start":
		e.mu.Lock()
		defer e.mu.Unlock()
		if b.state == container.StateRunning {
			w.WriteHeader(304)
			return
		}
		b.state = container.StateRunning
		w.WriteHeader(204)
	case "kill":
		e.mu.Lock()
		defer e.mu.Unlock()
		b.kills = append(b.kills, r.URL.Query().Get("signal"))
		if b.state != container.StateRunning {
			writeError(w, 409, "Cannot kill container: "+id+": Container "+id+" is not running")
			return
		}
		e.exitLocked(b, 137, false)
		w.WriteHeader(204)
	case "remove":
		e.mu.Lock()
		defer e.mu.Unlock()
		if b.state == container.StateRunning && r.URL.Query().Get("force") != "1" {
			writeError(w, 409, "You cannot remove a running container "+id+". Stop the container before attempting removal or force remove")
			return
		}
		e.exitLocked(b, 137, false)
		delete(e.boxes, id)
		w.WriteHeader(204)
	case "inspect":
		e.mu.Lock()
		st := &container.State{Status: b.state, Running: b.state == container.StateRunning, OOMKilled: b.oom, ExitCode: b.code}
		e.mu.Unlock()
		writeJSON(w, 200, container.InspectResponse{ID: b.id, Image: b.req.Image, State: st, Config: b.req.Config, HostConfig: b.req.HostConfig})
	case "update":
		var u container.UpdateConfig
		_ = json.NewDecoder(r.Body).Decode(&u)
		e.mu.Lock()
		b.updates = append(b.updates, u)
		e.mu.Unlock()
		writeJSON(w, 200, container.UpdateResponse{Warnings: []string{}})
	case "rename":
		e.mu.Lock()
		b.name = r.URL.Query().Get("name")
		e.mu.Unlock()
		w.WriteHeader(204)
	case "archive":
		tr := tar.NewReader(r.Body)
		for {
			h, err := tr.Next()
			if err != nil {
				break
			}
			data, _ := io.ReadAll(tr)
			e.mu.Lock()
			b.files[r.URL.Query().Get("path")+"/"+h.Name] = data
			e.mu.Unlock()
		}
		w.WriteHeader(200)
	default:
		writeError(w, 404, "page not found")
	}
}

// attach hijacks the connection as the engine does, and keeps its server
// side as the box's stdio.
func (e *fakeEngine) attach(w http.ResponseWriter, r *http.Request, b *fakeBox) {
	q := r.URL.Query()
	if q.Get("stream") != "1" || q.Get("stdin") != "1" || q.Get("stdout") != "1" || q.Get("stderr") != "1" ||
		!strings.EqualFold(r.Header.Get("Upgrade"), "tcp") {
		writeError(w, 400, "attach without stream, stdin, stdout and stderr, or without an upgrade")
		return
	}
	conn, rw, err := w.(http.Hijacker).Hijack()
	if err != nil {
		e.t.Errorf("hijack: %v", err)
		return
	}
	e.mu.Lock()
	exited := b.state == container.StateExited
	if !exited {
		b.conn, b.stdin = conn, rw.Reader
	}
	e.mu.Unlock()
	_, _ = rw.WriteString("HTTP/1.1 101 UPGRADED\r\nContent-Type: application/vnd.docker.raw-stream\r\nConnection: Upgrade\r\nUpgrade: tcp\r\n\r\n")
	_ = rw.Flush()
	if exited {
		// The engine ends the stream of a box that has ended.
		conn.Close()
	}
}

// wait answers the header at once and the exit when it comes.
func (e *fakeEngine) wait(w http.ResponseWriter, r *http.Request, b *fakeBox) {
	cond := r.URL.Query().Get("condition")
	e.mu.Lock()
	done := b.exited
	code := b.code
	notRunning := b.state != container.StateRunning
	e.mu.Unlock()
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(200)
	w.(http.Flusher).Flush()
	if cond == "not-running" && notRunning {
		_ = json.NewEncoder(w).Encode(container.WaitResponse{StatusCode: int64(code)})
		return
	}
	select {
	case <-done:
		e.mu.Lock()
		code = b.code
		e.mu.Unlock()
		_ = json.NewEncoder(w).Encode(container.WaitResponse{StatusCode: int64(code)})
	case <-r.Context().Done():
	case <-e.closing:
	}
}

// say writes the box's output on its attach stream: a multiplexed frame
// (1: stdout, 2: stderr).
func (b *fakeBox) say(t *testing.T, stream byte, s string) {
	t.Helper()
	hdr := make([]byte, 8)
	hdr[0] = stream
	binary.BigEndian.PutUint32(hdr[4:], uint32(len(s)))
	if _, err := b.conn.Write(append(hdr, s...)); err != nil {
		t.Fatalf("box output: %v", err)
	}
}

// hear reads n bytes the driver wrote on the box's stdin.
func (b *fakeBox) hear(t *testing.T, n int) string {
	t.Helper()
	buf := make([]byte, n)
	_ = b.conn.SetReadDeadline(time.Now().Add(30 * time.Second))
	if _, err := io.ReadFull(b.stdin, buf); err != nil {
		t.Fatalf("box stdin: %v", err)
	}
	return string(buf)
}

func (e *fakeEngine) clearFail(key string) {
	e.mu.Lock()
	defer e.mu.Unlock()
	delete(e.fail, key)
}

// state is a box's state on the engine ("" when it is gone).
func (e *fakeEngine) state(id string) container.ContainerState {
	e.mu.Lock()
	defer e.mu.Unlock()
	if b := e.boxes[id]; b != nil {
		return b.state
	}
	return ""
}

// kills are the signals the engine was asked to send a box.
func (e *fakeEngine) kills(b *fakeBox) []string {
	e.mu.Lock()
	defer e.mu.Unlock()
	return append([]string{}, b.kills...)
}

// updates are the resource updates the engine was asked for a box.
func (e *fakeEngine) updates(b *fakeBox) []container.UpdateConfig {
	e.mu.Lock()
	defer e.mu.Unlock()
	return append([]container.UpdateConfig{}, b.updates...)
}

func (e *fakeEngine) addImage(ref, id string) {
	e.mu.Lock()
	defer e.mu.Unlock()
	e.images[ref] = id
}

func (e *fakeEngine) removeImage(ref string) {
	e.mu.Lock()
	defer e.mu.Unlock()
	delete(e.images, ref)
}

func volumeWithLabels(name string, labels map[string]string) volume.Volume {
	return volume.Volume{Name: name, Driver: "local", Labels: labels, Scope: "local", CreatedAt: time.Now().Format(time.RFC3339)}
}
