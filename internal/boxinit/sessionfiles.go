//go:build linux

package boxinit

import (
	"io/fs"
	"path/filepath"
	"sort"
	"syscall"

	"github.com/runbox-mcp/runbox/internal/initproto"
)

// fileStamp tells whether a file changed without reading it.
type fileStamp struct {
	size, mtime, ctime int64
	ino                uint64
}

// snapshot stamps the workspace's regular files before a cell.
func snapshot(dir string) map[string]fileStamp {
	out := map[string]fileStamp{}
	_ = filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		if err == nil && installed(d) {
			return fs.SkipDir
		}
		if err != nil || !d.Type().IsRegular() {
			return nil
		}
		if st, ok := stamp(p); ok {
			out[p] = st
		}
		return nil
	})
	return out
}

func stamp(p string) (fileStamp, bool) {
	var st syscall.Stat_t
	if err := syscall.Lstat(p, &st); err != nil {
		return fileStamp{}, false
	}
	return fileStamp{size: st.Size, mtime: st.Mtim.Nano(), ctime: st.Ctim.Nano(), ino: st.Ino}, true
}

// collectChanged reports the workspace's regular files a session's cell
// created or changed (its stamp differs from before), in path order; the
// unchanged ones are never read, so a large data file loaded once costs
// nothing on later calls. The code of the call was written before the
// snapshot and is not an artifact.
func collectChanged(job *initproto.Job, before map[string]fileStamp, rep *initproto.Report) [][]byte {
	var paths []string
	_ = filepath.WalkDir(job.Dir, func(p string, d fs.DirEntry, err error) error {
		if err == nil && installed(d) {
			return fs.SkipDir
		}
		if err != nil || !d.Type().IsRegular() {
			return nil
		}
		if st, ok := stamp(p); ok && st == before[p] {
			return nil
		}
		if rel, err := filepath.Rel(job.Dir, p); err == nil {
			paths = append(paths, filepath.ToSlash(rel))
		}
		return nil
	})
	sort.Strings(paths)
	return readArtifacts(job, paths, nil, rep)
}
