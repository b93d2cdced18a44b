// Package manifest declares the sandbox's rules: the languages and the
// images they run on, the default and maximum limits, the isolation level
// and the concurrency. It is pure data and validation, and the one source
// for what the agent is told (the tool description is rendered here), so
// that guidance never disagrees with enforcement.
//
// It must not know about Docker, MCP or any transport.
package manifest
