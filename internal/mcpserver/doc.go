// Package mcpserver assembles runbox's MCP server from the manifest and a
// runner, and serves it on a transport. It holds wiring only: tools,
// prompts and resources live in their own packages. A Server keeps its
// own state (the long runs' registry, the Tasks layer), no package
// globals.
//
// It must not know an engine or the run algorithm's insides: it hands
// tools a sandbox.Runner.
package mcpserver
