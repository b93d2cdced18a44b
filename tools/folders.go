package tools

import (
	"errors"
	"fmt"
	"io"
	"os"
	"path"
	"path/filepath"
	"strings"

	"github.com/runbox-mcp/runbox/contract"
	"github.com/runbox-mcp/runbox/manifest"
)

// readSource reads a file named under a declared folder (/mnt/<name>/...)
// from the host, at most limit bytes. os.Root keeps every step of the path,
// links included, inside the folder.
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
	if !filepath.IsLocal(rel) || path.Clean(rel) != rel {
		return nil, errors.New("the path must stay inside the folder")
	}
	root, err := os.OpenRoot(folder)
	if err != nil {
		return nil, fmt.Errorf("the folder cannot be opened: %v", err)
	}
	defer root.Close()
	f, err := root.Open(rel)
	if err != nil {
		return nil, fmt.Errorf("cannot be read inside its folder: %v", errors.Unwrap(err))
	}
	defer f.Close()
	if st, err := f.Stat(); err != nil || !st.Mode().IsRegular() {
		return nil, errors.New("not a regular file")
	}
	data, err := io.ReadAll(io.LimitReader(f, limit+1))
	if err != nil {
		return nil, err
	}
	if int64(len(data)) > limit {
		return nil, errors.New("the input files and stdin would exceed their limit")
	}
	return data, nil
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
