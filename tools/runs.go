package tools

import (
	"github.com/runbox-mcp/runbox/contract"
	"github.com/runbox-mcp/runbox/runs"
)

// The run service's call and arguments, as the MCP layer's handlers, saved
// tools and schemas name them.
type (
	Call        = runs.Call
	RunCodeArgs = runs.RunCodeArgs
	InputFile   = runs.InputFile
)

// invalid is the error of a request that never reaches a box.
func invalid(format string, a ...any) *contract.ErrorInfo {
	info := contract.Invalid(format, a...)
	return &info
}
