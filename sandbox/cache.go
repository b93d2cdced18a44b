package sandbox

import (
	"context"
	"crypto/sha256"
	"encoding/binary"
	"encoding/hex"
	"encoding/json"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/runbox-mcp/runbox/contract"

	"github.com/runbox-mcp/runbox/manifest"
)

// Cache answers an exact repeat of a deterministic run from memory, without
// a box. The key is the language, its image digest and command, the code,
// stdin, input files, timeout and every limit. Only runs whose outcome is
// the program's own (ok, syntax, runtime) are kept: never a timeout, a
// resource limit, an OOM or a sandbox failure.
type Cache struct {
	next   Runner
	digest func(context.Context, string) (string, error)
	limits []byte
	ttl    time.Duration
	max    int64
	now    func() time.Time

	mu      sync.Mutex
	entries map[string]*cached
	order   []string
	bytes   int64
}

type cached struct {
	res     contract.Result
	expires time.Time
	size    int64
}

var _ Runner = (*Cache)(nil)

// NewCache wraps next; digest names an image's content, so a rebuilt image
// never answers from an older one's runs.
func NewCache(next Runner, m *manifest.Manifest, digest func(context.Context, string) (string, error)) *Cache {
	limits, _ := json.Marshal(m.Limits)
	return &Cache{next: next, digest: digest, limits: limits, ttl: m.Cache.TTL(), max: int64(m.Cache.MaxBytes),
		now: time.Now, entries: map[string]*cached{}}
}

// Sessions are the wrapped runner's: the cache never answers a session's
// call.
func (c *Cache) Sessions() SessionRunner { return c.next.Sessions() }

// Peek is the wrapped runner's: a cached answer is never in progress.
func (c *Cache) Peek(ctx context.Context, id string) (Peek, bool) { return c.next.Peek(ctx, id) }

// Close closes the wrapped runner.
func (c *Cache) Close() error { return c.next.Close() }

// Adopt is the wrapped runner's: an adopted run's result is not cached
// (its run was not answered from or for the cache).
func (c *Cache) Adopt(ctx context.Context, d Detached) contract.Result { return c.next.Adopt(ctx, d) }

// MarkKept is the wrapped runner's.
func (c *Cache) MarkKept(boxID string) { c.next.MarkKept(boxID) }

// Run answers from the cache or runs the job and keeps its result.
func (c *Cache) Run(ctx context.Context, req RunRequest) contract.Result {
	job := req.Job
	key, ok := c.key(ctx, job)
	if !ok || req.Streams != nil || req.Mounts != nil {
		// A run that reaches the host (tool calls, a client's folders) is
		// not the code's alone.
		return c.next.Run(ctx, req)
	}
	if res, hit := c.get(key, job.RunID); hit {
		return res
	}
	res := c.next.Run(ctx, req)
	if cacheable(res) {
		c.put(key, res)
	}
	return res
}

func cacheable(res contract.Result) bool {
	return res.Error == nil || res.Error.Kind == contract.KindSyntax || res.Error.Kind == contract.KindRuntime
}

func (c *Cache) key(ctx context.Context, job contract.Job) (string, bool) {
	digest, err := c.digest(ctx, job.Language.Image)
	if err != nil {
		return "", false
	}
	h := sha256.New()
	field := func(b []byte) {
		var n [8]byte
		binary.BigEndian.PutUint64(n[:], uint64(len(b)))
		h.Write(n[:])
		h.Write(b)
	}
	lang, _ := json.Marshal(job.Language)
	field(lang)
	field([]byte(digest))
	field(c.limits)
	field([]byte(job.Timeout.String()))
	field([]byte(job.Code))
	field([]byte(job.Stdin))
	files := slices.Clone(job.Files)
	slices.SortFunc(files, func(a, b contract.File) int { return strings.Compare(a.Path, b.Path) })
	for _, f := range files {
		field([]byte(f.Path))
		field(f.Data)
	}
	return hex.EncodeToString(h.Sum(nil)), true
}

// get returns a copy of a cached result under the new run's id.
func (c *Cache) get(key, runID string) (contract.Result, bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.expire()
	e, ok := c.entries[key]
	if !ok {
		return contract.Result{}, false
	}
	res := e.res
	res.RunID = runID
	res.Artifacts = make([]contract.Artifact, len(e.res.Artifacts))
	for i, a := range e.res.Artifacts {
		a.URI = contract.ArtifactURI(runID, a.Path)
		res.Artifacts[i] = a
	}
	res.Metrics.Cached = true
	res.Metrics.Pooled = false
	res.Metrics.QueueMs, res.Metrics.StartupMs = 0, 0
	return res, true
}

func (c *Cache) put(key string, res contract.Result) {
	size := int64(len(res.Stdout) + len(res.Stderr))
	for _, a := range res.Artifacts {
		size += int64(len(a.Data))
	}
	if size > c.max {
		return
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if old, ok := c.entries[key]; ok {
		c.bytes -= old.size
	} else {
		c.order = append(c.order, key)
	}
	c.entries[key] = &cached{res: res, expires: c.now().Add(c.ttl), size: size}
	c.bytes += size
	for c.bytes > c.max && len(c.order) > 0 {
		c.drop()
	}
}

func (c *Cache) expire() {
	for len(c.order) > 0 {
		if e := c.entries[c.order[0]]; e != nil && c.now().Before(e.expires) {
			return
		}
		c.drop()
	}
}

func (c *Cache) drop() {
	if e, ok := c.entries[c.order[0]]; ok {
		c.bytes -= e.size
		delete(c.entries, c.order[0])
	}
	c.order = c.order[1:]
}
