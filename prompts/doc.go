// Package prompts holds runbox's MCP prompts, rendered from the manifest
// so that guidance never disagrees with the limits that are enforced. It
// knows nothing of Docker.
package prompts
