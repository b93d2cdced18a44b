package runstore

import (
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"sync"
	"time"

	"github.com/runbox-mcp/runbox/internal/statefile"
)

// Entry is one record: its kind and id name its file, Finished and
// Updated decide when it goes, Data is the caller's.
type Entry struct {
	Kind string `json:"kind"`
	ID   string `json:"id"`
	// Finished: the run (or task) is over; the record only keeps its
	// result, for Options.Keep after Updated.
	Finished bool            `json:"finished"`
	Updated  time.Time       `json:"updated"`
	Data     json.RawMessage `json:"data"`
}

// Options bound a Store.
type Options struct {
	// MaxEntries and MaxBytes bound the directory's records (every
	// server's): past them the oldest finished are dropped first, and a
	// record that still does not fit is refused (ErrFull).
	MaxEntries int
	MaxBytes   int64
	// Keep is how long a finished record stays after its last update.
	Keep time.Duration
	// Stale is how long an unfinished record stays without an update: a
	// run no server ever finished (its box long gone).
	Stale time.Duration
	// Logger reports records that cannot be read; nil reports nothing.
	Logger *slog.Logger
}

// ErrFull is a record that does not fit beside the unfinished ones.
var ErrFull = errors.New("the run store is full")

// ErrBadID is an id that cannot name a record (it would name a file
// outside the store, or is too long).
var ErrBadID = errors.New("not a record id")

// Store is a directory of records.
type Store struct {
	dir  string
	opts Options
	now  func() time.Time
	// mu serialises this process's writes; other processes' writes are
	// atomic renames of their own records.
	mu sync.Mutex
	// locks are the records this process holds (Hold).
	locks map[string]*os.File
}

// Open opens (creating, private to the user) the store in dir.
func Open(dir string, opts Options) (*Store, error) {
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return nil, fmt.Errorf("run store: %w", err)
	}
	if opts.Logger == nil {
		opts.Logger = slog.New(slog.DiscardHandler)
	}
	if opts.MaxEntries <= 0 {
		opts.MaxEntries = 1024
	}
	if opts.MaxBytes <= 0 {
		opts.MaxBytes = 256 << 20
	}
	if opts.Keep <= 0 {
		opts.Keep = time.Hour
	}
	if opts.Stale <= 0 {
		opts.Stale = 48 * time.Hour
	}
	return &Store{dir: dir, opts: opts, now: time.Now, locks: map[string]*os.File{}}, nil
}

// Dir is the store's directory.
func (s *Store) Dir() string { return s.dir }

const ext = ".json"

// name is the file of kind's id, or ErrBadID.
func name(kind, id string) (string, error) {
	if !validPart(kind) || !validPart(id) {
		return "", ErrBadID
	}
	return kind + "-" + id + ext, nil
}

// validPart: letters, digits, '_' only; short.
func validPart(p string) bool {
	if p == "" || len(p) > 64 {
		return false
	}
	for _, c := range p {
		if !(c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '_') {
			return false
		}
	}
	return true
}

// Put writes e, replacing the record of its kind and id, atomically. A
// store over its bounds drops its oldest finished records first (never
// e's), and refuses e with ErrFull if that is not enough.
func (s *Store) Put(e Entry) error {
	file, err := name(e.Kind, e.ID)
	if err != nil {
		return err
	}
	if e.Updated.IsZero() {
		e.Updated = s.now()
	}
	b, err := json.Marshal(e)
	if err != nil {
		return err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if err := s.makeRoom(file, int64(len(b))); err != nil {
		return err
	}
	return s.write(file, b)
}

// write replaces file by b: a temporary file renamed over it, so a
// reader (or a server killed mid-write) sees the old record or the new,
// never a part. No fsync: a killed process loses nothing the kernel
// holds; only a machine's crash may lose the last records.
func (s *Store) write(file string, b []byte) error {
	f, err := os.CreateTemp(s.dir, ".tmp-*")
	if err != nil {
		return fmt.Errorf("run store: %w", err)
	}
	_, werr := f.Write(b)
	cerr := f.Close()
	if werr == nil {
		werr = cerr
	}
	if werr == nil {
		werr = os.Rename(f.Name(), filepath.Join(s.dir, file))
	}
	if werr != nil {
		_ = os.Remove(f.Name())
		return fmt.Errorf("run store: %w", werr)
	}
	return nil
}

// makeRoom drops the oldest finished records until one of size bytes
// fits as file (which it replaces if it exists).
func (s *Store) makeRoom(file string, size int64) error {
	files, err := s.files()
	if err != nil {
		return err
	}
	count, bytes := 1, size
	for f, n := range files {
		if f != file {
			count++
			bytes += n
		}
	}
	if count <= s.opts.MaxEntries && bytes <= s.opts.MaxBytes {
		return nil
	}
	var done []Entry
	for f := range files {
		if f == file {
			continue
		}
		if e, ok := s.read(f); ok && e.Finished {
			done = append(done, e)
		}
	}
	sort.Slice(done, func(i, j int) bool { return done[i].Updated.Before(done[j].Updated) })
	drop := 0
	for drop < len(done) && (count > s.opts.MaxEntries || bytes > s.opts.MaxBytes) {
		f, _ := name(done[drop].Kind, done[drop].ID)
		count--
		bytes -= files[f]
		drop++
	}
	if count > s.opts.MaxEntries || bytes > s.opts.MaxBytes {
		return ErrFull
	}
	for _, e := range done[:drop] {
		s.remove(e.Kind, e.ID)
	}
	return nil
}

// files are the record files and their sizes.
func (s *Store) files() (map[string]int64, error) {
	des, err := os.ReadDir(s.dir)
	if err != nil {
		return nil, fmt.Errorf("run store: %w", err)
	}
	out := make(map[string]int64, len(des))
	for _, de := range des {
		n := de.Name()
		if !de.Type().IsRegular() || !strings.HasSuffix(n, ext) || strings.HasPrefix(n, ".") {
			continue
		}
		info, err := de.Info()
		if err != nil || info.Size() > s.opts.MaxBytes {
			continue // removed meanwhile, or too large to be a record
		}
		out[n] = info.Size()
	}
	return out, nil
}

// read reads one record file; a file that is not a record is logged and
// skipped (it is never a reason to fail). The directory is untrusted
// input: only a regular file is read (a FIFO, a device or a link is
// skipped, and never blocks the caller, who may hold s.mu), and no more
// than the store's byte bound, which no record it wrote passes.
func (s *Store) read(file string) (Entry, bool) {
	b, err := statefile.Read(filepath.Join(s.dir, file), s.opts.MaxBytes)
	if err != nil {
		if !errors.Is(err, os.ErrNotExist) {
			s.opts.Logger.Warn("run store: a file that is not a record is ignored", "file", filepath.Join(s.dir, file), "err", err)
		}
		return Entry{}, false
	}
	var e Entry
	if err := json.Unmarshal(b, &e); err != nil || e.Kind == "" || e.ID == "" {
		s.opts.Logger.Warn("run store: a record that cannot be read is ignored", "file", filepath.Join(s.dir, file), "err", err)
		return Entry{}, false
	}
	if want, err := name(e.Kind, e.ID); err != nil || want != file {
		s.opts.Logger.Warn("run store: a record under another name is ignored", "file", filepath.Join(s.dir, file))
		return Entry{}, false
	}
	return e, true
}

// Get returns kind's record id, unless it has expired.
func (s *Store) Get(kind, id string) (Entry, bool) {
	file, err := name(kind, id)
	if err != nil {
		return Entry{}, false
	}
	e, ok := s.read(file)
	if !ok || s.expired(e) {
		return Entry{}, false
	}
	return e, true
}

// expired reports whether e is past its keeping.
func (s *Store) expired(e Entry) bool {
	age := s.now().Sub(e.Updated)
	if e.Finished {
		return age >= s.opts.Keep
	}
	return age >= s.opts.Stale
}

// Delete removes kind's record id.
func (s *Store) Delete(kind, id string) {
	if _, err := name(kind, id); err != nil {
		return
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	s.remove(kind, id)
}

func (s *Store) remove(kind, id string) {
	file, _ := name(kind, id)
	_ = os.Remove(filepath.Join(s.dir, file))
}

// List returns kind's records that have not expired, in no order.
func (s *Store) List(kind string) []Entry {
	files, err := s.files()
	if err != nil {
		s.opts.Logger.Warn("run store", "err", err)
		return nil
	}
	var out []Entry
	for f := range files {
		if !strings.HasPrefix(f, kind+"-") {
			continue
		}
		if e, ok := s.read(f); ok && e.Kind == kind && !s.expired(e) {
			out = append(out, e)
		}
	}
	return out
}

// Sweep removes the expired records (every server's: expiry is the
// same for all, but a record a live server holds stays), and temporary
// files a killed writer left. gone, when set, is told each record
// removed.
func (s *Store) Sweep(gone func(Entry)) {
	des, err := os.ReadDir(s.dir)
	if err != nil {
		return
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, de := range des {
		n := de.Name()
		if strings.HasPrefix(n, ".tmp-") {
			if info, err := de.Info(); err == nil && s.now().Sub(info.ModTime()) > time.Minute {
				_ = os.Remove(filepath.Join(s.dir, n))
			}
			continue
		}
		if !strings.HasSuffix(n, ext) {
			continue
		}
		if e, ok := s.read(n); ok && s.expired(e) {
			if release, held := s.tryHold(e.Kind, e.ID); held {
				s.remove(e.Kind, e.ID)
				release()
				if gone != nil {
					gone(e)
				}
			}
		}
	}
}
