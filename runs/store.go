package runs

import (
	"fmt"
	"sync"
	"time"

	"github.com/runbox-mcp/runbox/contract"
)

// ArtifactStore keeps the artifacts of recent runs readable as resources,
// for a time to live and within a byte cap (the oldest runs go first).
// A run's resources belong to its caller (the MCP layer's principal): to another, a
// run that is kept, gone or never was reads the same, as unknown.
type ArtifactStore struct {
	mu       sync.Mutex
	ttl      time.Duration
	maxBytes int64
	now      func() time.Time

	runs  map[string]*storedRun
	order []string // runs by age, oldest first
	bytes int64
	// gone remembers why a run's files are no longer here, so that a
	// read by its owner says "expired" rather than "unknown run".
	gone map[string]tombstone
}

// tombstone is why a run's files are gone, told to its owner only.
type tombstone struct {
	owner, why string
}

type storedRun struct {
	owner   string
	expires time.Time
	files   map[string]contract.Artifact
	// streams are stdout and stderr as runbox kept them, when the answer
	// showed only part of them.
	streams map[string]string
	bytes   int64
}

// maxTombstones bounds the memory of runs that are gone.
const maxTombstones = 10000

// NewArtifactStore returns a store with a TTL and a byte cap.
func NewArtifactStore(ttl time.Duration, maxBytes int64) *ArtifactStore {
	return &ArtifactStore{ttl: ttl, maxBytes: maxBytes, now: time.Now, runs: map[string]*storedRun{}, gone: map[string]tombstone{}}
}

// Put keeps, for owner, a result's artifacts whose content is known, and
// the streams that the answer shown (res rendered ForModel) cut.
func (s *ArtifactStore) Put(owner string, res, shown contract.Result) {
	run := &storedRun{owner: owner, files: map[string]contract.Artifact{}, streams: map[string]string{}}
	for _, a := range res.Artifacts {
		if a.Data != nil {
			run.files[a.Path] = a
			run.bytes += int64(len(a.Data))
		}
	}
	storeDisplays(run, res)
	if c := shown.StdoutCut; c != nil && c.URI != "" {
		run.streams[contract.StreamStdout] = res.Stdout
		run.bytes += int64(len(res.Stdout))
	}
	if c := shown.StderrCut; c != nil && c.URI != "" {
		run.streams[contract.StreamStderr] = res.Stderr
		run.bytes += int64(len(res.Stderr))
	}
	if len(run.files) == 0 && len(run.streams) == 0 {
		return
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	s.expire()
	if _, had := s.runs[res.RunID]; had {
		// Kept already (a long run's record read back in the server
		// that ran it): the same run, the same files.
		return
	}
	if run.bytes > s.maxBytes || s.ttl <= 0 {
		s.bury(res.RunID, owner, fmt.Sprintf("its artifacts and output (%d bytes) were not kept: the store holds %d bytes for %s", run.bytes, s.maxBytes, s.ttl))
		return
	}
	run.expires = s.now().Add(s.ttl)
	s.runs[res.RunID] = run
	s.order = append(s.order, res.RunID)
	s.bytes += run.bytes
	for s.bytes > s.maxBytes && len(s.order) > 0 {
		s.drop(s.order[0], "its artifacts and output were evicted to make room for newer runs")
	}
}

// Get returns one artifact of owner's run, or an error that says why it
// is not there.
func (s *ArtifactStore) Get(owner, runID, path string) (contract.Artifact, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	run, err := s.run(owner, runID, "made no artifacts")
	if err != nil {
		return contract.Artifact{}, err
	}
	a, ok := run.files[path]
	if !ok {
		return contract.Artifact{}, fmt.Errorf("run %s has no artifact %q (or its content was over the byte cap)", runID, path)
	}
	return a, nil
}

// Stream returns a stream of owner's run that its answer cut, or an error
// that says why it is not there.
func (s *ArtifactStore) Stream(owner, runID, stream string) (string, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	run, err := s.run(owner, runID, "its answer showed all of its output")
	if err != nil {
		return "", err
	}
	text, ok := run.streams[stream]
	if !ok {
		return "", fmt.Errorf("run %s: its answer showed all of its %s", runID, stream)
	}
	return text, nil
}

// run finds owner's stored run, or says why it is not there: gone
// (expired, evicted, too large), or never stored, for the reason unstored
// gives. Another owner's run, kept or gone, reads as never stored. The
// caller holds s.mu.
func (s *ArtifactStore) run(owner, runID, unstored string) (*storedRun, error) {
	s.expire()
	if run, ok := s.runs[runID]; ok && run.owner == owner {
		return run, nil
	}
	if t, ok := s.gone[runID]; ok && t.owner == owner {
		return nil, fmt.Errorf("run %s: %s", runID, t.why)
	}
	return nil, fmt.Errorf("run %s is unknown to this server, or %s", runID, unstored)
}

func (s *ArtifactStore) expire() {
	now := s.now()
	for len(s.order) > 0 {
		id := s.order[0]
		if run := s.runs[id]; run != nil && now.Before(run.expires) {
			return
		}
		s.drop(id, fmt.Sprintf("its artifacts and output expired (they are kept for %s)", s.ttl))
	}
}

func (s *ArtifactStore) drop(id, why string) {
	owner := ""
	if run, ok := s.runs[id]; ok {
		s.bytes -= run.bytes
		owner = run.owner
		delete(s.runs, id)
	}
	s.order = s.order[1:]
	s.bury(id, owner, why)
}

func (s *ArtifactStore) bury(id, owner, why string) {
	if len(s.gone) >= maxTombstones {
		clear(s.gone)
	}
	s.gone[id] = tombstone{owner: owner, why: why}
}
