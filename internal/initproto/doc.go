// Package initproto is the wire protocol between the runbox server and
// runbox-init, the PID 1 of every box.
//
// The server writes one JSON [Job] to the box's attached stdin. runbox-init
// answers on its stdout with frames: one [Report] frame, then one artifact
// frame per artifact whose content is sent, in the report's order. A frame
// is a type byte, a big-endian uint32 length and the payload.
//
// The package owns only the format; it knows nothing of Docker or MCP.
package initproto
