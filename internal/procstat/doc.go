// Package procstat reads /proc/<pid>/stat, whose second field
// (the command name) may itself hold spaces and parentheses. It is shared
// by the server and runbox-init, and knows nothing else.
package procstat
