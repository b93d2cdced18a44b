// Package prompts holds runbox's MCP prompts, rendered from the manifest
// so that guidance never disagrees with the limits that are enforced. It
// reads results as sandbox types and knows nothing of Docker.
package prompts
