//go:build linux

package boxinit

import (
	"errors"
	"os"
	"os/signal"
	"sync"
	"syscall"
	"time"
)

// childReaper waits for every child process, as PID 1 must, so that none
// is left a zombie, and picks out the main one. (The servers' reapers of
// boxes whose server is gone are another thing, in the drivers.)
type childReaper struct {
	sigs     chan os.Signal
	quit     chan struct{}
	mu       sync.Mutex
	mainPid  int
	pending  map[int]syscall.WaitStatus // exited before setMain saw the pid
	mainDone chan struct{}
	// mainStatus is written before mainDone is closed.
	mainStatus syscall.WaitStatus
	noChildren chan struct{}
}

func newChildReaper() *childReaper {
	r := &childReaper{sigs: make(chan os.Signal, 8), quit: make(chan struct{}), pending: map[int]syscall.WaitStatus{}}
	signal.Notify(r.sigs, syscall.SIGCHLD)
	go r.loop()
	return r
}

func (r *childReaper) stop() {
	signal.Stop(r.sigs)
	close(r.quit)
}

// expect arms the child reaper for a new main process.
func (r *childReaper) expect() {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.mainPid = 0
	r.mainDone = make(chan struct{})
	r.noChildren = make(chan struct{})
}

func (r *childReaper) setMain(pid int) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.mainPid = pid
	if st, ok := r.pending[pid]; ok {
		delete(r.pending, pid)
		r.mainStatus = st
		close(r.mainDone)
	}
	select {
	case r.sigs <- syscall.SIGCHLD: // reap anything that raced us
	default:
	}
}

func (r *childReaper) loop() {
	for {
		select {
		case <-r.quit:
			return
		case <-r.sigs:
		}
		r.reapAll()
	}
}

func (r *childReaper) reapAll() {
	for {
		var st syscall.WaitStatus
		pid, err := syscall.Wait4(-1, &st, syscall.WNOHANG, nil)
		r.mu.Lock()
		switch {
		case errors.Is(err, syscall.EINTR):
			r.mu.Unlock()
			continue
		case err != nil: // ECHILD: nobody left
			if r.mainDone != nil && isClosed(r.mainDone) && !isClosed(r.noChildren) {
				close(r.noChildren)
			}
			r.mu.Unlock()
			return
		case pid == 0:
			r.mu.Unlock()
			return
		}
		switch {
		case pid == r.mainPid && r.mainPid != 0:
			r.mainStatus = st
			close(r.mainDone)
			r.mainPid = 0
		case r.mainPid == 0 && r.mainDone != nil && !isClosed(r.mainDone):
			r.pending[pid] = st
		}
		r.mu.Unlock()
	}
}

// waitNoChildren waits until every child has been reaped, or d passes.
func (r *childReaper) waitNoChildren(d time.Duration) {
	deadline := time.After(d)
	tick := time.NewTicker(20 * time.Millisecond)
	defer tick.Stop()
	for {
		select {
		case <-r.noChildren:
			return
		case <-deadline:
			return
		case <-tick.C:
			// A SIGCHLD can coalesce with one already handled; ask again.
			select {
			case r.sigs <- syscall.SIGCHLD:
			default:
			}
		}
	}
}

func isClosed(c chan struct{}) bool {
	select {
	case <-c:
		return true
	default:
		return false
	}
}
