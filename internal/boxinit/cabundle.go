//go:build linux

package boxinit

import (
	"bytes"
	"os"
	"path/filepath"
)

// writeCABundle writes path, read-only: the image's CAs (the first of
// system that it has) and then ca, runbox's CA certificate, which the job
// carries. Written once per box; a later job leaves it as it is.
func writeCABundle(path string, system []string, ca []byte) error {
	var own []byte
	for _, f := range system {
		if b, err := os.ReadFile(f); err == nil {
			own = b
			break
		}
	}
	b := make([]byte, 0, len(own)+len(ca)+1)
	b = append(b, own...)
	if len(b) > 0 && b[len(b)-1] != '\n' {
		b = append(b, '\n')
	}
	b = append(b, ca...)
	if cur, err := os.ReadFile(path); err == nil && bytes.Equal(cur, b) {
		return nil
	}
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		return err
	}
	return replaceFile(path, bytes.NewReader(b), 0o444)
}
