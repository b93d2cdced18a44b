package statefile

import (
	"errors"
	"fmt"
	"io"
	"os"
)

// ErrNotRegular is a path that is not a regular file: a link, a FIFO, a
// device, a socket or a directory.
var ErrNotRegular = errors.New("not a regular file")

// ErrTooLarge is a file past the bound its reader set.
var ErrTooLarge = errors.New("file too large")

// Open opens the regular file at path with flag (os.O_RDONLY, os.O_RDWR,
// os.O_CREATE...) and perm. It never follows a link at the path's last
// element and never blocks (a FIFO without a peer answers at once): the
// open adds O_NOFOLLOW and O_NONBLOCK where the system has them, and
// the opened file must be a regular file (fstat), or it is closed and
// the error wraps ErrNotRegular.
func Open(path string, flag int, perm os.FileMode) (*os.File, error) {
	f, err := open(path, flag, perm)
	if err != nil {
		if isLink(err) {
			return nil, fmt.Errorf("%s: %w (a link)", path, ErrNotRegular)
		}
		return nil, err
	}
	fi, err := f.Stat()
	if err != nil {
		_ = f.Close()
		return nil, err
	}
	if !fi.Mode().IsRegular() {
		_ = f.Close()
		return nil, fmt.Errorf("%s: %w (%s)", path, ErrNotRegular, fi.Mode().Type())
	}
	return f, nil
}

// Read reads the regular file at path (Open), at most max bytes: a file
// whose size is past max is refused before a byte is read, and the read
// stops past max however the file grows meanwhile (ErrTooLarge).
func Read(path string, max int64) ([]byte, error) {
	f, err := Open(path, os.O_RDONLY, 0)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	fi, err := f.Stat()
	if err != nil {
		return nil, err
	}
	if fi.Size() > max {
		return nil, fmt.Errorf("%s: %w (%d bytes, at most %d)", path, ErrTooLarge, fi.Size(), max)
	}
	b, err := io.ReadAll(io.LimitReader(f, max+1))
	if err != nil {
		return nil, err
	}
	if int64(len(b)) > max {
		return nil, fmt.Errorf("%s: %w (past %d bytes)", path, ErrTooLarge, max)
	}
	return b, nil
}
