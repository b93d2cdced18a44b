package sandbox

import (
	"crypto/hmac"
	"crypto/rand"
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"time"

	"github.com/runbox-mcp/runbox/contract"
	"github.com/runbox-mcp/runbox/internal/statefile"
	"github.com/runbox-mcp/runbox/manifest"
)

// checkpoints keeps the sessions' checkpoints in a directory of the
// state directory, one directory each named by the sha256 of its id
// (the id, a capability, is never written): record.json, record.mac (its
// keyed MAC) and image/ (runsc's files, for a checkpoint that keeps
// memory). A checkpoint is written under a temporary name and renamed
// into place, so a server killed meanwhile leaves none half-written; the
// next sweep removes what it left. Everything read back is hostile input:
// the record is refused unless its MAC, its owner and its files match.
type checkpoints struct {
	dir string
	c   manifest.Checkpoints
	// mu orders admissions and commits, so that concurrent checkpoints
	// cannot pass the caps together.
	mu sync.Mutex
	// pending counts checkpoints being taken, per client and in all.
	pending   map[string]int
	pendingAt int
}

// ckRecord is a checkpoint's record.
type ckRecord struct {
	Version int    `json:"version"`
	Client  string `json:"client"` // clientKey of the caller
	// Session is the key of the session it was taken of.
	Session  string          `json:"session"`
	Language string          `json:"language"`
	Memory   bool            `json:"memory"`
	Limits   manifest.Limits `json:"limits"`
	Mounts   []HostMount     `json:"mounts,omitempty"`
	Cells    []string        `json:"cells"`
	Files    []ckFile        `json:"files,omitempty"`
	Bytes    int64           `json:"bytes"`
	Created  time.Time       `json:"created"`
	Expires  time.Time       `json:"expires"`
}

type ckFile struct {
	Name   string `json:"name"`
	Size   int64  `json:"size"`
	SHA256 string `json:"sha256"`
}

const (
	ckVersion   = 1
	ckRecordMax = 16 << 20
	ckNewPrefix = ".new-"
	ckImage     = "image"
)

// newCheckpointID is 192 random bits, like a session id.
func newCheckpointID() string {
	b := make([]byte, 24)
	_, _ = rand.Read(b)
	return "c_" + base64.RawURLEncoding.EncodeToString(b)
}

// prepare makes the directory (root's alone: images hold the boxes'
// memory) and its MAC key, once.
func (k *checkpoints) prepare() ([]byte, error) {
	if err := os.MkdirAll(k.dir, 0o700); err != nil {
		return nil, err
	}
	if err := os.Chmod(k.dir, 0o700); err != nil {
		return nil, err
	}
	path := filepath.Join(k.dir, ".key")
	if key, err := statefile.Read(path, 64); err == nil && len(key) == 32 {
		return key, nil
	}
	key := make([]byte, 32)
	_, _ = rand.Read(key)
	tmp := path + ".tmp"
	_ = os.Remove(tmp)
	f, err := statefile.Open(tmp, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o600)
	if err != nil {
		return nil, err
	}
	_, err = f.Write(key)
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		return nil, err
	}
	// Link, not rename: two servers starting together keep one key.
	if err := os.Link(tmp, path); err != nil && !errors.Is(err, os.ErrExist) {
		return nil, err
	}
	_ = os.Remove(tmp)
	if key, err = statefile.Read(path, 64); err != nil || len(key) != 32 {
		return nil, fmt.Errorf("the checkpoints' key %s is unreadable", path)
	}
	return key, nil
}

func ckMAC(key []byte, idKey string, record []byte) string {
	m := hmac.New(sha256.New, key)
	m.Write([]byte("runbox-checkpoint-v1\n" + idKey + "\n"))
	m.Write(record)
	return hex.EncodeToString(m.Sum(nil))
}

// entry is a kept checkpoint as a sweep reads it (unverified: enough to
// count, never to restore).
type ckEntry struct {
	dir     string
	client  string
	bytes   int64
	expires time.Time
}

// sweep removes the expired checkpoints and what killed servers left
// half-written, and returns the others.
func (k *checkpoints) sweep(now time.Time) []ckEntry {
	entries, _ := os.ReadDir(k.dir)
	var out []ckEntry
	for _, e := range entries {
		path := filepath.Join(k.dir, e.Name())
		if strings.HasPrefix(e.Name(), ckNewPrefix) {
			if info, err := e.Info(); err == nil && now.Sub(info.ModTime()) > 2*CheckpointTimeout {
				_ = os.RemoveAll(path)
			}
			continue
		}
		if !e.IsDir() || strings.HasPrefix(e.Name(), ".") {
			continue
		}
		var rec ckRecord
		raw, err := statefile.Read(filepath.Join(path, "record.json"), ckRecordMax)
		if err != nil || json.Unmarshal(raw, &rec) != nil {
			// Unreadable: counted at its size on disk until it ages out.
			info, ierr := e.Info()
			if ierr == nil && now.Sub(info.ModTime()) > k.c.MaxAge() {
				_ = os.RemoveAll(path)
				continue
			}
			rec.Bytes, rec.Expires = dirBytes(path), now.Add(time.Hour)
		}
		if now.After(rec.Expires) || rec.Expires.Sub(now) > k.c.MaxAge()+time.Hour {
			_ = os.RemoveAll(path)
			continue
		}
		out = append(out, ckEntry{dir: path, client: rec.Client, bytes: max(rec.Bytes, 0), expires: rec.Expires})
	}
	return out
}

func dirBytes(dir string) int64 {
	var n int64
	_ = filepath.WalkDir(dir, func(_ string, d os.DirEntry, err error) error {
		if err == nil && d.Type().IsRegular() {
			if info, err := d.Info(); err == nil {
				n += info.Size()
			}
		}
		return nil
	})
	return n
}

// admit reserves a place for client's new checkpoint, or says which cap
// refuses it; release gives the place back.
func (k *checkpoints) admit(client string) (release func(), refused *contract.ErrorInfo) {
	k.mu.Lock()
	defer k.mu.Unlock()
	if k.pending == nil {
		k.pending = map[string]int{}
	}
	ck := clientKey(client)
	mine, all := k.pending[ck], k.pendingAt
	var mineBytes, allBytes int64
	for _, e := range k.sweep(time.Now()) {
		all++
		allBytes += e.bytes
		if e.client == ck {
			mine++
			mineBytes += e.bytes
		}
	}
	switch {
	case mine >= k.c.MaxPerClient:
		return nil, ptr(contract.CheckpointsFull("this client keeps too many checkpoints", int64(k.c.MaxPerClient)))
	case all >= k.c.MaxTotal:
		return nil, ptr(contract.CheckpointsFull("this server keeps too many checkpoints", int64(k.c.MaxTotal)))
	case mineBytes >= int64(k.c.MaxClientBytes):
		return nil, ptr(contract.CheckpointsFull("this client's checkpoints take too many bytes", int64(k.c.MaxClientBytes)))
	case allBytes >= int64(k.c.MaxBytes):
		return nil, ptr(contract.CheckpointsFull("this server's checkpoints take too many bytes", int64(k.c.MaxBytes)))
	}
	k.pending[ck]++
	k.pendingAt++
	return func() {
		k.mu.Lock()
		defer k.mu.Unlock()
		if k.pending[ck]--; k.pending[ck] <= 0 {
			delete(k.pending, ck)
		}
		k.pendingAt--
	}, nil
}

// begin makes the temporary directory a checkpoint is written in; its
// image directory is tmp/image.
func (k *checkpoints) begin() (string, error) {
	if _, err := k.prepare(); err != nil {
		return "", err
	}
	return os.MkdirTemp(k.dir, ckNewPrefix)
}

// commit hashes tmp's image, writes the record and its MAC and moves the
// checkpoint into place under id, unless it passes the byte caps then.
func (k *checkpoints) commit(tmp, id string, rec ckRecord) (*contract.ErrorInfo, error) {
	key, err := k.prepare()
	if err != nil {
		return nil, err
	}
	if rec.Memory {
		if rec.Files, err = hashImage(filepath.Join(tmp, ckImage)); err != nil {
			return nil, err
		}
	}
	for _, f := range rec.Files {
		rec.Bytes += f.Size
	}
	for _, c := range rec.Cells {
		rec.Bytes += int64(len(c))
	}
	k.mu.Lock()
	defer k.mu.Unlock()
	var mineBytes, allBytes int64
	for _, e := range k.sweep(time.Now()) {
		allBytes += e.bytes
		if e.client == rec.Client {
			mineBytes += e.bytes
		}
	}
	if mineBytes+rec.Bytes > int64(k.c.MaxClientBytes) {
		return ptr(contract.CheckpointsFull(fmt.Sprintf("this checkpoint (%d bytes) would pass this client's bytes of checkpoints", rec.Bytes), int64(k.c.MaxClientBytes))), nil
	}
	if allBytes+rec.Bytes > int64(k.c.MaxBytes) {
		return ptr(contract.CheckpointsFull(fmt.Sprintf("this checkpoint (%d bytes) would pass this server's bytes of checkpoints", rec.Bytes), int64(k.c.MaxBytes))), nil
	}
	raw, err := json.Marshal(rec)
	if err != nil {
		return nil, err
	}
	idKey := sessionKey(id)
	if err := writeFileSync(filepath.Join(tmp, "record.json"), raw); err != nil {
		return nil, err
	}
	if err := writeFileSync(filepath.Join(tmp, "record.mac"), []byte(ckMAC(key, idKey, raw))); err != nil {
		return nil, err
	}
	return nil, os.Rename(tmp, filepath.Join(k.dir, idKey))
}

func writeFileSync(path string, b []byte) error {
	f, err := statefile.Open(path, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o600)
	if err != nil {
		return err
	}
	_, err = f.Write(b)
	if err == nil {
		err = f.Sync()
	}
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	return err
}

// hashImage lists an image directory's files with their sizes and
// sha256; anything but a regular file is refused.
func hashImage(dir string) ([]ckFile, error) {
	entries, err := os.ReadDir(dir)
	if err != nil {
		return nil, err
	}
	var files []ckFile
	for _, e := range entries {
		if !e.Type().IsRegular() {
			return nil, fmt.Errorf("%s is not a regular file", e.Name())
		}
		f, err := statefile.Open(filepath.Join(dir, e.Name()), os.O_RDONLY, 0)
		if err != nil {
			return nil, err
		}
		h := sha256.New()
		n, err := io.Copy(h, f)
		f.Close()
		if err != nil {
			return nil, err
		}
		files = append(files, ckFile{Name: e.Name(), Size: n, SHA256: hex.EncodeToString(h.Sum(nil))})
	}
	return files, nil
}

// open returns client's checkpoint id, verified: its MAC, its owner, its
// age and, for one that keeps memory, every file of its image. An id
// that is not client's is not found, whatever is on disk.
func (k *checkpoints) open(id, client string) (ckRecord, string, *contract.ErrorInfo) {
	var rec ckRecord
	if !strings.HasPrefix(id, "c_") || len(id) > 64 {
		return rec, "", ptr(contract.NoCheckpoint())
	}
	key, err := k.prepare()
	if err != nil {
		return rec, "", ptr(contract.CheckpointTampered("the checkpoints' key is unreadable: " + err.Error()))
	}
	idKey := sessionKey(id)
	dir := filepath.Join(k.dir, idKey)
	raw, err := statefile.Read(filepath.Join(dir, "record.json"), ckRecordMax)
	if errors.Is(err, os.ErrNotExist) {
		return rec, "", ptr(contract.NoCheckpoint())
	}
	if err != nil {
		return rec, "", ptr(contract.CheckpointTampered("its record is unreadable"))
	}
	mac, err := statefile.Read(filepath.Join(dir, "record.mac"), 128)
	if err != nil || !hmac.Equal(mac, []byte(ckMAC(key, idKey, raw))) {
		return rec, "", ptr(contract.CheckpointTampered("its record does not match its MAC"))
	}
	if err := json.Unmarshal(raw, &rec); err != nil || rec.Version != ckVersion {
		return rec, "", ptr(contract.CheckpointTampered("its record is not one this server reads"))
	}
	if rec.Client != clientKey(client) {
		return rec, "", ptr(contract.NoCheckpoint())
	}
	if time.Now().After(rec.Expires) {
		_ = os.RemoveAll(dir)
		return rec, "", ptr(contract.NoCheckpoint())
	}
	if !rec.Memory {
		return rec, dir, nil
	}
	files, err := hashImage(filepath.Join(dir, ckImage))
	if err != nil {
		return rec, "", ptr(contract.CheckpointTampered("its image: " + err.Error()))
	}
	if len(files) != len(rec.Files) {
		return rec, "", ptr(contract.CheckpointTampered("its image has other files than were saved"))
	}
	for i, f := range files {
		if f != rec.Files[i] {
			return rec, "", ptr(contract.CheckpointTampered("its image's file " + f.Name + " changed"))
		}
	}
	return rec, dir, nil
}

// remove deletes client's checkpoint id (after open verified it).
func (k *checkpoints) remove(id string) {
	_ = os.RemoveAll(filepath.Join(k.dir, sessionKey(id)))
}
