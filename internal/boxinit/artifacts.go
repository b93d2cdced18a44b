//go:build linux

package boxinit

import (
	"crypto/sha256"
	"encoding/hex"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"sort"
	"syscall"

	"github.com/runbox-mcp/runbox/internal/initproto"
)

// baseline is the workspace as the program found it: the stamp of each
// regular file, and the hash of each input file and of the code.
type baseline struct {
	stamps map[string]fileStamp
	inputs map[string]string
}

// fileStamp tells whether a file changed without reading it.
type fileStamp struct {
	size, mtime, ctime int64
	ino                uint64
}

func stamp(p string) (fileStamp, bool) {
	var st syscall.Stat_t
	if err := syscall.Lstat(p, &st); err != nil {
		return fileStamp{}, false
	}
	return fileStamp{size: st.Size, mtime: st.Mtim.Nano(), ctime: st.Ctim.Nano(), ino: st.Ino}, true
}

// snapshot stamps the workspace's regular files before the program runs.
func snapshot(dir string) map[string]fileStamp {
	out := map[string]fileStamp{}
	walkWorkspace(dir, func(p string) {
		if st, ok := stamp(p); ok {
			out[p] = st
		}
	})
	return out
}

// collect reports the regular files in the workspace that the call created
// or changed, in path order: those whose stamp differs from before, less
// the inputs and the code found with the content they were given. The
// unchanged files are never read, so a large data file a session loaded
// once costs nothing on later calls. Symlinks and other special files are
// never followed or read.
func collect(job *initproto.Job, before baseline, rep *initproto.Report) [][]byte {
	var paths []string
	walkWorkspace(job.Dir, func(p string) {
		if st, ok := stamp(p); ok && st == before.stamps[p] {
			return
		}
		if rel, err := filepath.Rel(job.Dir, p); err == nil {
			paths = append(paths, filepath.ToSlash(rel))
		}
	})
	sort.Strings(paths)
	return readArtifacts(job, paths, func(rel, sum string) bool {
		h, isInput := before.inputs[rel]
		return isInput && h == sum
	}, rep)
}

// walkWorkspace calls fn with the path of each regular file in the
// workspace dir, outside the directories of installed packages; links and
// devices are skipped, never followed.
func walkWorkspace(dir string, fn func(path string)) {
	_ = filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		if err == nil && installed(d) {
			return fs.SkipDir
		}
		if err == nil && d.Type().IsRegular() {
			fn(p)
		}
		return nil
	})
}

// installed says whether d is a directory of installed packages, whose
// files are never artifacts: `npm install x` puts node_modules/ in the
// workspace (where require and import find it), hundreds of files that
// would crowd the run's own outputs out of the artifact caps.
func installed(d fs.DirEntry) bool {
	return d.IsDir() && d.Name() == "node_modules"
}

// readArtifacts puts the files at paths (relative to the workspace, in
// order) into the report as artifacts, within the job's caps: the content
// of those that fit the byte budget, the count of those past the file cap.
// skip, when set, leaves out a file by its path and content hash.
func readArtifacts(job *initproto.Job, paths []string, skip func(rel, sum string) bool, rep *initproto.Report) [][]byte {
	budget := job.MaxArtifactBytes
	var contents [][]byte
	for _, rel := range paths {
		data, size, sum, ok := readRegular(filepath.Join(job.Dir, filepath.FromSlash(rel)), budget)
		if !ok || skip != nil && skip(rel, sum) {
			continue
		}
		if len(rep.Artifacts) >= job.MaxArtifacts {
			rep.ArtifactsOmitted++
			continue
		}
		a := initproto.Artifact{Path: rel, Size: size, SHA256: sum}
		if data != nil {
			a.Sent = true
			budget -= size
			contents = append(contents, data)
		}
		rep.Artifacts = append(rep.Artifacts, a)
	}
	return contents
}

// readRegular hashes a regular file without following links, and returns
// its content too when it fits in budget.
func readRegular(path string, budget int64) (data []byte, size int64, sum string, ok bool) {
	f, err := os.OpenFile(path, os.O_RDONLY|syscall.O_NOFOLLOW|syscall.O_NONBLOCK, 0)
	if err != nil {
		return nil, 0, "", false
	}
	defer f.Close()
	st, err := f.Stat()
	if err != nil || !st.Mode().IsRegular() {
		return nil, 0, "", false
	}
	size = st.Size()
	h := sha256.New()
	if size <= budget {
		data, err = io.ReadAll(io.TeeReader(f, h))
		if err != nil {
			return nil, 0, "", false
		}
		size = int64(len(data))
	} else if size, err = io.Copy(h, f); err != nil {
		return nil, 0, "", false
	}
	return data, size, hex.EncodeToString(h.Sum(nil)), true
}
