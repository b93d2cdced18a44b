// Package upstream is runbox as an MCP client: it connects to the
// manifest's servers (stdio or streamable HTTP), keeps their tool lists
// current (tools/list_changed), restarts a server that died, and serves
// the tool calls that code in a box makes over the box's channel, under
// the manifest's policy and per-run bounds. It knows the channel only as
// initproto.StreamHandler; it knows nothing of Docker or Kubernetes.
package upstream
