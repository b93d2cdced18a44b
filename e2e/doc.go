// Package e2e holds the end-to-end tests: the built runbox binary, driven
// over MCP by real clients (mcp-go's, and the reference TypeScript SDK's),
// running code in real containers on a real Docker engine.
//
// They run with `make e2e` (build tag e2e). In CI a missing engine fails
// them loudly; on a developer machine without a docker CLI they skip.
package e2e
