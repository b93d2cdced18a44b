package contract

// Root is a client's MCP root as mounted in a box.
type Root struct {
	Path string `json:"path" jsonschema:"description=Where the root is in the box: /mnt/roots/<name>, read-only."`
	URI  string `json:"uri" jsonschema:"description=The root's URI as the client named it."`
}
