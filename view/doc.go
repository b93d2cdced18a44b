// Package view is runbox's view of a run for hosts that render MCP Apps
// (the io.modelcontextprotocol/ui extension): one self-contained HTML page,
// embedded in the binary, with its Content-Security-Policy. It owns the
// page, its URI and its policy; it knows nothing of MCP servers, tools or
// sandboxes: the host hands the page a tool's result, and everything the
// page does after that goes back through the host as ordinary MCP calls.
//
// Everything a box displays is untrusted. The page never parses box content
// as its own markup: text and markdown become DOM nodes, images become <img>
// elements of data: URLs, and HTML or SVG documents go only into nested
// iframes sandboxed without scripts, which inherit the page's policy (no
// remote URL, no script).
package view
