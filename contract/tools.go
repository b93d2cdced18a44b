package contract

// The built-in tools' names, as clients, the MCP bundle's manifest and the
// answers' hints name them.
const (
	ToolRunCode      = "run_code"
	ToolSessionOpen  = "session_open"
	ToolSessionClose = "session_close"
	ToolSessionList  = "session_list"
	ToolRunWait      = "run_wait"
	ToolRunCancel    = "run_cancel"
)

// RunCodeTitle is run_code's title, in its annotations and the bundle's
// list of tools.
const RunCodeTitle = "Run code in a sandbox"
