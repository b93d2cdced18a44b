package tools

import (
	"time"

	"github.com/runbox-mcp/runbox/contract"
)

// Detached stands for sandbox.Detached until the durbox branch (which
// adds it) is merged: then this file goes and Detached is an alias.
type Detached struct {
	RunID     string       `json:"run_id"`
	BoxID     string       `json:"box_id"`
	Isolation string       `json:"isolation"`
	Session   string       `json:"session,omitempty"`
	Job       contract.Job `json:"job"`
	Sent      time.Time    `json:"sent"`
}
