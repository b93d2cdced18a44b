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

// collectArtifacts reports the regular files in the workspace that the run
// created or changed, in path order. Symlinks and other special files are
// never followed or read. Everything in the box is dead by now, so nothing
// can swap a file under us.
func collectArtifacts(job *initproto.Job, inputs map[string]string, rep *initproto.Report) [][]byte {
	var paths []string
	_ = filepath.WalkDir(job.Dir, func(p string, d fs.DirEntry, err error) error {
		if err == nil && installed(d) {
			return fs.SkipDir
		}
		if err != nil || !d.Type().IsRegular() {
			return nil // directories are walked; links and devices skipped
		}
		rel, err := filepath.Rel(job.Dir, p)
		if err == nil {
			paths = append(paths, filepath.ToSlash(rel))
		}
		return nil
	})
	sort.Strings(paths)
	return readArtifacts(job, paths, func(rel, sum string) bool {
		h, isInput := inputs[rel]
		return isInput && h == sum
	}, rep)
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
