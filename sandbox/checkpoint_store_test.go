package sandbox

import (
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/runbox-mcp/runbox/contract"
	"github.com/runbox-mcp/runbox/manifest"
)

func testStore(t *testing.T) *checkpoints {
	c := manifest.DefaultCheckpoints()
	c.MaxPerClient, c.MaxTotal = 2, 3
	return &checkpoints{dir: filepath.Join(t.TempDir(), "checkpoints"), c: c}
}

// take writes a checkpoint of client with an image of one file.
func take(t *testing.T, k *checkpoints, client string, image []byte) (string, *contract.ErrorInfo) {
	t.Helper()
	release, full := k.admit(client)
	if full != nil {
		return "", full
	}
	defer release()
	tmp, err := k.begin()
	if err != nil {
		t.Fatal(err)
	}
	defer os.RemoveAll(tmp)
	if err := os.MkdirAll(filepath.Join(tmp, ckImage), 0o700); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(tmp, ckImage, "checkpoint.img"), image, 0o600); err != nil {
		t.Fatal(err)
	}
	id := newCheckpointID()
	now := time.Now()
	full, err = k.commit(tmp, id, ckRecord{Version: ckVersion, Client: clientKey(client), Language: "python", Memory: true,
		Cells: []string{"x = 1"}, Created: now, Expires: now.Add(time.Hour)})
	if err != nil {
		t.Fatal(err)
	}
	return id, full
}

// TestCheckpointStoreVerifies: a checkpoint opens for its client only; a
// changed image, a changed record, a MAC of another id and an added
// file are refused as checkpoint_invalid.
func TestCheckpointStoreVerifies(t *testing.T) {
	k := testStore(t)
	id, full := take(t, k, "alice", []byte("memory of the interpreter"))
	if full != nil {
		t.Fatal(full)
	}
	if rec, _, bad := k.open(id, "alice"); bad != nil || rec.Cells[0] != "x = 1" {
		t.Fatalf("alice's own: %+v %+v", bad, rec)
	}
	for _, other := range []string{"bob", "local"} {
		if _, _, bad := k.open(id, other); bad == nil || bad.Kind != contract.KindCheckpointNotFound {
			t.Errorf("%s opened alice's: %+v", other, bad)
		}
	}
	if _, _, bad := k.open("c_unknown", "alice"); bad == nil || bad.Kind != contract.KindCheckpointNotFound {
		t.Errorf("unknown: %+v", bad)
	}
	dir := filepath.Join(k.dir, sessionKey(id))
	img := filepath.Join(dir, ckImage, "checkpoint.img")
	invalid := func(what string) {
		t.Helper()
		if _, _, bad := k.open(id, "alice"); bad == nil || bad.Kind != contract.KindCheckpointInvalid {
			t.Errorf("%s: %+v", what, bad)
		}
	}
	restore := func(p string, b []byte) {
		if err := os.WriteFile(p, b, 0o600); err != nil {
			t.Fatal(err)
		}
	}
	orig, _ := os.ReadFile(img)
	restore(img, []byte("memory of the interpreteR"))
	invalid("a changed image")
	restore(img, orig)
	restore(filepath.Join(dir, ckImage, "extra"), []byte("x"))
	invalid("an added file")
	os.Remove(filepath.Join(dir, ckImage, "extra"))
	rec, _ := os.ReadFile(filepath.Join(dir, "record.json"))
	restore(filepath.Join(dir, "record.json"), append([]byte(" "), rec...))
	invalid("a changed record")
	restore(filepath.Join(dir, "record.json"), rec)
	// Another checkpoint's record and MAC moved under this id.
	id2, _ := take(t, k, "alice", []byte("other"))
	dir2 := filepath.Join(k.dir, sessionKey(id2))
	if err := os.RemoveAll(dir); err != nil {
		t.Fatal(err)
	}
	if err := os.Rename(dir2, dir); err != nil {
		t.Fatal(err)
	}
	invalid("another id's record")
}

// TestCheckpointStoreCaps: per client and per server counts and bytes
// refuse with resource_limit checkpoints; expired and half-written
// checkpoints are swept.
func TestCheckpointStoreCaps(t *testing.T) {
	k := testStore(t)
	for range 2 {
		if _, full := take(t, k, "alice", []byte("a")); full != nil {
			t.Fatal(full)
		}
	}
	if _, full := take(t, k, "alice", []byte("a")); full == nil || full.Limit != contract.LimitCheckpoints {
		t.Fatalf("alice's third: %+v", full)
	}
	if _, full := take(t, k, "bob", []byte("b")); full != nil {
		t.Fatal(full)
	}
	if _, full := take(t, k, "carol", []byte("c")); full == nil || full.Kind != contract.KindResourceLimit {
		t.Fatalf("the server's fourth: %+v", full)
	}
	// Bytes: a checkpoint past the client's bytes is not kept.
	k2 := testStore(t)
	k2.c.MaxClientBytes = 10
	if _, full := take(t, k2, "alice", make([]byte, 11)); full == nil || full.Limit != contract.LimitCheckpoints {
		t.Fatalf("past the bytes: %+v", full)
	}
	if left := k2.sweep(time.Now()); len(left) != 0 {
		t.Fatalf("a refused checkpoint was kept: %+v", left)
	}
	// Expired ones go; so do half-written ones of a killed server.
	old := filepath.Join(k.dir, ckNewPrefix+"killed")
	if err := os.Mkdir(old, 0o700); err != nil {
		t.Fatal(err)
	}
	past := time.Now().Add(-time.Hour)
	_ = os.Chtimes(old, past, past)
	if left := k.sweep(time.Now().Add(2 * time.Hour)); len(left) != 0 {
		t.Errorf("expired checkpoints kept: %+v", left)
	}
	if _, err := os.Stat(old); !os.IsNotExist(err) {
		t.Errorf("a half-written checkpoint was kept: %v", err)
	}
}
