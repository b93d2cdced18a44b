package mcpserver

import (
	"github.com/runbox-mcp/runbox/audit"
	"github.com/runbox-mcp/runbox/expose"
	"github.com/runbox-mcp/runbox/manifest"
	"github.com/runbox-mcp/runbox/sandbox"
)

// exposures is the server's exposures when the manifest enables them
// and the runner keeps sessions it can reach into; nil otherwise. They
// end with their sessions, which the runner's Close ends.
func exposures(m *manifest.Manifest, r sandbox.Runner, o Options) *expose.Set {
	if !m.Sessions.Enabled || !m.Sessions.Expose.Enabled || r.Sessions() == nil {
		return nil
	}
	// Through the result cache too: its sessions are the runner's.
	d, ok := r.Sessions().(sandbox.SessionDialer)
	if !ok {
		return nil
	}
	var record func(audit.Entry)
	if o.Audit != nil {
		record = func(e audit.Entry) {
			if err := o.Audit.Record(e); err != nil && o.Logger != nil {
				o.Logger.Warn("audit log", "err", err)
			}
		}
	}
	return expose.New(m.Sessions.Expose, d, o.Logger, record)
}
