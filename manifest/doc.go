// Package manifest declares the sandbox's rules: the languages and the
// images they run on, the default and maximum limits, the isolation level
// and the concurrency. It is pure data and validation, and the one source
// for what the agent is told (the tool description is rendered here), so
// that guidance never disagrees with enforcement.
//
// A loaded manifest is read-only: the runner, the drivers and the server
// share one pointer to it. What is derived from it after loading (the
// languages' derived images, the versions and packages the images report)
// is a copy, made before anything holds it or handed to the server beside
// it.
//
// It must not know about Docker, MCP or any transport.
package manifest
