package enginehost

import (
	"os"
	"runtime"
)

// Local is this machine, as Find reads it.
func Local() Host {
	home, _ := os.UserHomeDir()
	return Host{
		GOOS: runtime.GOOS, Home: home, Getenv: os.Getenv, ReadFile: os.ReadFile,
		Exists: func(p string) bool { _, err := os.Stat(p); return err == nil },
	}
}
