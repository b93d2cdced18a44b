package runstore

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"
)

func open(t *testing.T, dir string, o Options) *Store {
	t.Helper()
	s, err := Open(dir, o)
	if err != nil {
		t.Fatal(err)
	}
	return s
}

func data(n int) json.RawMessage {
	b, _ := json.Marshal(strings.Repeat("x", n))
	return b
}

func TestPutGetDelete(t *testing.T) {
	s := open(t, t.TempDir(), Options{})
	e := Entry{Kind: "run", ID: "r_01ABC", Data: json.RawMessage(`{"a":1}`)}
	if err := s.Put(e); err != nil {
		t.Fatal(err)
	}
	got, ok := s.Get("run", "r_01ABC")
	if !ok || string(got.Data) != `{"a":1}` || got.Updated.IsZero() {
		t.Fatalf("Get = %+v, %v", got, ok)
	}
	if _, ok := s.Get("task", "r_01ABC"); ok {
		t.Fatal("another kind's record was found")
	}
	s.Delete("run", "r_01ABC")
	if _, ok := s.Get("run", "r_01ABC"); ok {
		t.Fatal("deleted record found")
	}
}

// A client's run id names a file: nothing but a plain id may.
func TestBadIDs(t *testing.T) {
	dir := t.TempDir()
	s := open(t, filepath.Join(dir, "runs"), Options{})
	for _, id := range []string{"", "../x", "a/b", "..", "a.b", strings.Repeat("a", 65), "a\x00b"} {
		if err := s.Put(Entry{Kind: "run", ID: id}); !errors.Is(err, ErrBadID) {
			t.Errorf("Put(%q) = %v, want ErrBadID", id, err)
		}
		if _, ok := s.Get("run", id); ok {
			t.Errorf("Get(%q) found something", id)
		}
		if _, ok := s.Hold("run", id); ok {
			t.Errorf("Hold(%q) held", id)
		}
	}
	if des, _ := os.ReadDir(dir); len(des) != 1 {
		t.Fatalf("files outside the store: %v", des)
	}
}

func TestBoundsDropOldestFinishedFirst(t *testing.T) {
	s := open(t, t.TempDir(), Options{MaxEntries: 3, MaxBytes: 1 << 20})
	clock := time.Now()
	s.now = func() time.Time { return clock }
	put := func(id string, finished bool) error {
		clock = clock.Add(time.Second)
		return s.Put(Entry{Kind: "run", ID: id, Finished: finished, Updated: clock})
	}
	for _, id := range []string{"a", "b"} {
		if err := put(id, true); err != nil {
			t.Fatal(err)
		}
	}
	if err := put("c", false); err != nil {
		t.Fatal(err)
	}
	if err := put("d", false); err != nil {
		t.Fatal(err)
	}
	if _, ok := s.Get("run", "a"); ok {
		t.Fatal("the oldest finished record was kept past the count")
	}
	for _, id := range []string{"b", "c", "d"} {
		if _, ok := s.Get("run", id); !ok {
			t.Fatalf("%s dropped", id)
		}
	}
	// Replacing a record does not count it twice.
	if err := put("d", true); err != nil {
		t.Fatal(err)
	}
	if _, ok := s.Get("run", "b"); !ok {
		t.Fatal("b dropped by a replacement")
	}
	for _, id := range []string{"e", "f"} { // drop b, then d
		if err := put(id, false); err != nil {
			t.Fatal(err)
		}
	}
	if err := put("g", false); !errors.Is(err, ErrFull) {
		t.Fatalf("a record past unfinished ones = %v, want ErrFull", err)
	}
	if _, ok := s.Get("run", "g"); ok {
		t.Fatal("a refused record was written")
	}
	for _, id := range []string{"c", "e", "f"} {
		if _, ok := s.Get("run", id); !ok {
			t.Fatalf("unfinished %s dropped", id)
		}
	}
}

func TestBoundsBytes(t *testing.T) {
	s := open(t, t.TempDir(), Options{MaxEntries: 100, MaxBytes: 10_000})
	for i := range 5 {
		if err := s.Put(Entry{Kind: "run", ID: fmt.Sprint("r", i), Finished: true, Updated: time.Now().Add(time.Duration(i) * time.Second), Data: data(3000)}); err != nil {
			t.Fatal(err)
		}
	}
	files, _ := s.files()
	var total int64
	for _, n := range files {
		total += n
	}
	if total > 10_000 || len(files) != 3 {
		t.Fatalf("%d files, %d bytes; want 3 within 10000", len(files), total)
	}
	if _, ok := s.Get("run", "r4"); !ok {
		t.Fatal("the newest was dropped")
	}
	if err := s.Put(Entry{Kind: "run", ID: "big", Data: data(20_000)}); !errors.Is(err, ErrFull) {
		t.Fatalf("a record larger than the store = %v", err)
	}
}

func TestKeepAndStale(t *testing.T) {
	s := open(t, t.TempDir(), Options{Keep: time.Minute, Stale: time.Hour})
	now := time.Now()
	s.now = func() time.Time { return now }
	_ = s.Put(Entry{Kind: "run", ID: "done", Finished: true, Updated: now})
	_ = s.Put(Entry{Kind: "run", ID: "going", Updated: now})
	now = now.Add(2 * time.Minute)
	if _, ok := s.Get("run", "done"); ok {
		t.Fatal("a finished record outlived Keep")
	}
	if _, ok := s.Get("run", "going"); !ok {
		t.Fatal("an unfinished record went at Keep")
	}
	if n := len(s.List("run")); n != 1 {
		t.Fatalf("List = %d records, want 1", n)
	}
	var gone []string
	s.Sweep(func(e Entry) { gone = append(gone, e.ID) })
	if len(gone) != 1 || gone[0] != "done" {
		t.Fatalf("Sweep told %v gone", gone)
	}
	if files, _ := s.files(); len(files) != 1 {
		t.Fatalf("Sweep left %v", files)
	}
	now = now.Add(2 * time.Hour)
	s.Sweep(nil)
	if files, _ := s.files(); len(files) != 0 {
		t.Fatalf("Sweep left a stale record: %v", files)
	}
}

// A reader never sees a part of a record, and a writer leaves no
// temporary file.
func TestAtomicReplace(t *testing.T) {
	s := open(t, t.TempDir(), Options{})
	big := []json.RawMessage{data(200_000), data(300_000)}
	var wg sync.WaitGroup
	stop := make(chan struct{})
	wg.Add(1)
	go func() {
		defer wg.Done()
		for i := 0; ; i++ {
			select {
			case <-stop:
				return
			default:
			}
			if err := s.Put(Entry{Kind: "run", ID: "x", Data: big[i%2]}); err != nil {
				t.Error(err)
				return
			}
		}
	}()
	other := open(t, s.Dir(), Options{})
	for range 300 {
		if e, ok := other.Get("run", "x"); ok && !bytes.Equal(e.Data, big[0]) && !bytes.Equal(e.Data, big[1]) {
			t.Fatal("read a partial record")
		}
	}
	close(stop)
	wg.Wait()
	des, _ := os.ReadDir(s.Dir())
	for _, de := range des {
		if strings.HasPrefix(de.Name(), ".tmp-") {
			t.Fatalf("left %s", de.Name())
		}
	}
}

// Two servers on one directory see each other's records, never replace
// them, and one holds a record's run at a time.
func TestTwoStoresOneDirectory(t *testing.T) {
	dir := t.TempDir()
	a, b := open(t, dir, Options{}), open(t, dir, Options{})
	_ = a.Put(Entry{Kind: "run", ID: "ra", Data: json.RawMessage(`"a"`)})
	_ = b.Put(Entry{Kind: "run", ID: "rb", Data: json.RawMessage(`"b"`)})
	if e, ok := b.Get("run", "ra"); !ok || string(e.Data) != `"a"` {
		t.Fatal("b does not see a's record")
	}
	if n := len(a.List("run")); n != 2 {
		t.Fatalf("a lists %d", n)
	}
	release, ok := a.Hold("run", "ra")
	if !ok {
		t.Fatal("a could not hold its own record")
	}
	if _, ok := b.Hold("run", "ra"); ok {
		t.Fatal("b held a record a holds")
	}
	b.Sweep(nil) // expired nothing; must not touch a's
	if _, ok := b.Get("run", "ra"); !ok {
		t.Fatal("b's sweep removed a's record")
	}
	release()
	rel, ok := b.Hold("run", "ra")
	if !ok {
		t.Fatal("b could not hold a record a released")
	}
	rel()
}

// The hold of a process that died is free: the kernel drops a dead
// process's locks (the e2e tests kill -9 a server; here the lock's file
// is closed, as a dying process's are).
func TestHoldReleasedWithItsFile(t *testing.T) {
	s := open(t, t.TempDir(), Options{})
	path := filepath.Join(s.Dir(), "locks", "run-r1.lock")
	_, ok := s.Hold("run", "r1")
	if !ok {
		t.Fatal("not held")
	}
	if _, ok := s.Hold("run", "r1"); ok {
		t.Fatal("held twice")
	}
	if _, err := os.Stat(path); err != nil {
		t.Fatal(err)
	}
}

func TestCorruptRecordIgnored(t *testing.T) {
	var log bytes.Buffer
	s := open(t, t.TempDir(), Options{Logger: slog.New(slog.NewTextHandler(&log, nil))})
	_ = s.Put(Entry{Kind: "run", ID: "good", Data: json.RawMessage(`1`)})
	for file, content := range map[string]string{
		"run-bad.json":   `{"kind":"run","id":"bad","data":`,
		"run-other.json": `{"kind":"run","id":"good","data":2}`,
		"run-empty.json": ``,
	} {
		if err := os.WriteFile(filepath.Join(s.Dir(), file), []byte(content), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	if got := s.List("run"); len(got) != 1 || got[0].ID != "good" {
		t.Fatalf("List = %+v", got)
	}
	if _, ok := s.Get("run", "bad"); ok {
		t.Fatal("a corrupt record was read")
	}
	if e, _ := s.Get("run", "good"); string(e.Data) != "1" {
		t.Fatal("a record under another file name replaced the good one")
	}
	if !strings.Contains(log.String(), "cannot be read") {
		t.Fatalf("no log line: %s", log.String())
	}
	s.Sweep(nil)
	if err := s.Put(Entry{Kind: "run", ID: "next", Finished: true}); err != nil {
		t.Fatal(err)
	}
}

// The cost of a long run's record: one write (a 4 KiB answer) into a
// store holding 200 records.
func BenchmarkPut(b *testing.B) {
	s, err := Open(b.TempDir(), Options{})
	if err != nil {
		b.Fatal(err)
	}
	for i := range 200 {
		_ = s.Put(Entry{Kind: "run", ID: fmt.Sprint("r", i), Finished: true, Data: data(4096)})
	}
	d := data(4096)
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		if err := s.Put(Entry{Kind: "run", ID: "x", Data: d}); err != nil {
			b.Fatal(err)
		}
	}
}
