package runs

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"os"
	"path"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/runbox-mcp/runbox/contract"
	"github.com/runbox-mcp/runbox/manifest"
)

// sourceTimeout bounds reading one source on the host: a folder on a
// network or FUSE file system that stops answering fails the call instead
// of hanging it.
const sourceTimeout = 30 * time.Second

// maxSourceLinks is how many links a source's path may follow, as the
// kernel's own bound.
const maxSourceLinks = 40

// readSource reads a file named under a declared folder (/mnt/<name>/...)
// from the host, at most limit bytes, giving the box only what it could
// read there itself: the path is resolved as the box would resolve it
// (links included, none leaving the folder), every directory on the way
// must be searchable and the file readable by the box's uid and gid
// (m.User; owner, group and other bits, and POSIX ACLs), and only a regular
// file is read, opened without blocking and without following a link.
// The read has a deadline (sourceTimeout) and the file must not change
// while it is read.
func readSource(m *manifest.Manifest, src string, limit int64) ([]byte, error) {
	rest, ok := strings.CutPrefix(src, manifest.MountRoot+"/")
	name, rel, ok2 := strings.Cut(rest, "/")
	if !ok || !ok2 || rel == "" {
		return nil, fmt.Errorf("not a file under %s/<name>/", manifest.MountRoot)
	}
	var folder string
	for _, mt := range m.Mounts {
		if mt.Name == name {
			folder = mt.Path
		}
	}
	if folder == "" {
		return nil, fmt.Errorf("no declared folder is called %q", name)
	}
	if !filepath.IsLocal(rel) || path.Clean(rel) != rel || strings.ContainsAny(rel, "\x00") {
		return nil, errors.New("the path must stay inside the folder")
	}
	box, err := boxUser(m.User)
	if err != nil {
		return nil, err
	}
	type read struct {
		data []byte
		err  error
	}
	done := make(chan read, 1)
	go func() {
		data, err := readAsBox(folder, name, rel, box, limit)
		done <- read{data, err}
	}()
	timer := time.NewTimer(sourceTimeout)
	defer timer.Stop()
	select {
	case r := <-done:
		return r.data, r.err
	case <-timer.C:
		return nil, fmt.Errorf("not read within %s: its folder's file system does not answer", sourceTimeout)
	}
}

// boxIDs are the uid and gid the box's program runs as.
type boxIDs struct{ uid, gid uint32 }

func boxUser(user string) (boxIDs, error) {
	u, g, ok := strings.Cut(user, ":")
	uid, err1 := strconv.ParseUint(u, 10, 32)
	gid, err2 := strconv.ParseUint(g, 10, 32)
	if !ok || err1 != nil || err2 != nil {
		return boxIDs{}, fmt.Errorf("the box's user %q is not uid:gid", user)
	}
	return boxIDs{uint32(uid), uint32(gid)}, nil
}

// readAsBox reads folder/rel as readSource says.
func readAsBox(folder, name, rel string, box boxIDs, limit int64) ([]byte, error) {
	root, err := os.OpenRoot(folder)
	if err != nil {
		return nil, fmt.Errorf("the folder cannot be opened: %v", err)
	}
	defer root.Close()
	st, err := root.Stat(".")
	if err != nil {
		return nil, fmt.Errorf("the folder cannot be opened: %v", err)
	}
	// "/." reads the ACL of the folder itself when its path is a link.
	if !box.may(st, folder+string(filepath.Separator)+".", mayExec) {
		return nil, errors.New("the box may not enter its folder (permissions)")
	}
	file, want, err := resolveAsBox(root, folder, name, rel, box)
	if err != nil {
		return nil, err
	}
	f, err := root.OpenFile(file, sourceOpenFlags, 0)
	if err != nil {
		return nil, fmt.Errorf("cannot be read inside its folder: %v", errors.Unwrap(err))
	}
	defer f.Close()
	before, err := f.Stat()
	switch {
	case err != nil:
		return nil, err
	case !before.Mode().IsRegular():
		return nil, errors.New("not a regular file")
	case !os.SameFile(before, want):
		return nil, errors.New("the file changed while it was read")
	case !box.mayFile(before, f, mayRead):
		return nil, errors.New("the box's user may not read it (permissions): a source gives the box only what it could read at its path")
	case before.Size() > limit:
		return nil, errors.New("the input files and stdin would exceed their limit")
	}
	data, err := io.ReadAll(io.LimitReader(f, limit+1))
	if err != nil {
		return nil, err
	}
	if int64(len(data)) > limit {
		return nil, errors.New("the input files and stdin would exceed their limit")
	}
	after, err := f.Stat()
	if err != nil || int64(len(data)) != before.Size() || after.Size() != before.Size() || !after.ModTime().Equal(before.ModTime()) || !sameAgain(f, data) {
		return nil, errors.New("the file changed while it was read: try again once it is written")
	}
	return data, nil
}

// sameAgain reads f a second time and says whether it still holds data: a
// write under way during the first read (its mtime set when it began, the
// size the same) shows as a difference.
func sameAgain(f *os.File, data []byte) bool {
	buf := make([]byte, 256<<10)
	for off := 0; off < len(data); {
		n, err := f.ReadAt(buf[:min(len(buf), len(data)-off)], int64(off))
		if n == 0 || !bytes.Equal(buf[:n], data[off:off+n]) {
			return false
		}
		off += n
		if err != nil && off < len(data) {
			return false
		}
	}
	n, _ := f.ReadAt(buf[:1], int64(len(data)))
	return n == 0
}

// resolveAsBox follows rel from the folder's top as the box would at
// /mnt/<name>/rel: each directory must be searchable by the box, each link
// is followed (an absolute one only into /mnt/<name>/ itself), and nothing
// may leave the folder. It returns the path with no link left and the file
// it names, which must not be a directory.
func resolveAsBox(root *os.Root, folder, name, rel string, box boxIDs) (string, os.FileInfo, error) {
	parts := strings.Split(rel, "/")
	var cur []string
	links := 0
	for len(parts) > 0 {
		p := parts[0]
		parts = parts[1:]
		switch p {
		case "", ".":
			continue
		case "..":
			if len(cur) == 0 {
				return "", nil, errors.New("a link leads out of its folder")
			}
			cur = cur[:len(cur)-1]
			continue
		}
		next := path.Join(append(slices.Clone(cur), p)...)
		fi, err := root.Lstat(next)
		if err != nil {
			return "", nil, fmt.Errorf("cannot be read inside its folder: %v", errors.Unwrap(err))
		}
		switch {
		case fi.Mode()&os.ModeSymlink != 0:
			if links++; links > maxSourceLinks {
				return "", nil, errors.New("too many links")
			}
			target, err := root.Readlink(next)
			if err != nil {
				return "", nil, fmt.Errorf("cannot be read inside its folder: %v", errors.Unwrap(err))
			}
			if path.IsAbs(target) {
				inside, ok := strings.CutPrefix(path.Clean(target)+"/", manifest.MountRoot+"/"+name+"/")
				if !ok {
					return "", nil, errors.New("a link leads out of its folder")
				}
				cur, target = nil, strings.TrimSuffix(inside, "/")
			}
			parts = append(strings.Split(target, "/"), parts...)
		case fi.IsDir():
			if len(parts) == 0 {
				return "", nil, errors.New("a directory, not a file")
			}
			if !box.may(fi, filepath.Join(folder, filepath.FromSlash(next)), mayExec) {
				return "", nil, fmt.Errorf("the box may not enter %s (permissions)", next)
			}
			cur = append(cur, p)
		default:
			if len(parts) > 0 {
				return "", nil, fmt.Errorf("%s is not a directory", next)
			}
			if !fi.Mode().IsRegular() {
				return "", nil, errors.New("not a regular file (a source is a plain file: no device, pipe or socket)")
			}
			return next, fi, nil
		}
	}
	return "", nil, errors.New("a directory, not a file")
}

// saveArtifacts saves a run's artifacts in dir/<run_id>/: a folder that
// must not exist yet (nothing is overwritten), every path kept inside it
// by os.Root. What cannot be saved is said in the artifact's saved_to.
func saveArtifacts(dir string, res *contract.Result) {
	if dir == "" || len(res.Artifacts) == 0 {
		return
	}
	root, err := os.OpenRoot(dir)
	if err != nil {
		return
	}
	defer root.Close()
	if err := root.Mkdir(res.RunID, 0o755); err != nil {
		return
	}
	for i := range res.Artifacts {
		a := &res.Artifacts[i]
		if a.Data == nil || !filepath.IsLocal(a.Path) {
			continue
		}
		rel := path.Join(res.RunID, a.Path)
		if err := root.MkdirAll(path.Dir(rel), 0o755); err != nil {
			continue
		}
		f, err := root.OpenFile(rel, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o644)
		if err != nil {
			continue
		}
		_, werr := f.Write(a.Data)
		if cerr := f.Close(); werr == nil && cerr == nil {
			a.SavedTo = filepath.Join(dir, filepath.FromSlash(rel))
		}
	}
}
