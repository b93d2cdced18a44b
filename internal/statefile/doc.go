// Package statefile opens and reads the files of runbox's state
// directory (run records, locks, saved tools, the audit log, runbox's CA)
// as untrusted input: whoever can write there may have left a FIFO, a
// device, a link out of the directory or an endless file where runbox
// expects its own. It knows nothing of what the files hold.
package statefile
