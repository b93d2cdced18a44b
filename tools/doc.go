// Package tools holds runbox's MCP tools as data: each tool value carries
// its definition (schemas reflected from Go types, description rendered from
// the manifest, explicit annotations) and its handler.
//
// Handlers validate arguments against the manifest and turn a
// contract.Result into a CallToolResult. Every failure an agent can fix,
// bad arguments included, is a result with isError and a typed error.kind,
// never a protocol error. The package knows nothing of Docker or Kubernetes:
// it runs calls through a sandbox.Runner.
package tools
