// Package clientconfig writes runbox into MCP clients' configuration
// files: Claude Desktop's claude_desktop_config.json, Claude Code's
// ~/.claude.json (user scope) and VS Code's user mcp.json, at each
// platform's place. A merge changes only runbox's own entry: every other
// server, every other setting and their order stay as they were; a file
// that is not JSON is an error and is left untouched. Paths are computed
// from a Platform value, so every platform's are tested on any machine.
package clientconfig
