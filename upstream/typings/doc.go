// Package typings turns the upstream tools' JSON Schemas into typed
// bindings for the code that calls them: one neutral model of each
// tool's arguments and result (Parse), rendered as TypeScript
// declarations (TypeScript), as one-line signatures for search_tools
// (Signature), and read as is by the in-box Python library, which builds
// its typed stubs and validates a call's arguments from it. The model is
// the one place that reads schemas, so the languages never disagree.
//
// Schemas come from upstream servers and are untrusted: every walk is
// bounded (depth, nodes, enum sizes, text lengths), a $ref cycle is a
// named type, never an endless expansion, and whatever the model cannot
// say exactly becomes unknown, which is wider than the truth, never a
// wrong type. It knows nothing of MCP connections or the box.
package typings
