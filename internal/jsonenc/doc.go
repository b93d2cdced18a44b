// Package jsonenc appends JSON values exactly as encoding/json writes
// them, for the encoders that write a hot message by hand (initproto's
// cell job and report, the audit line) and must not differ from
// json.Marshal by a byte. It knows nothing of those messages.
package jsonenc
