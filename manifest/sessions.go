package manifest

import "time"

// Sessions configures long-lived boxes whose interpreter keeps its state
// between calls (session_open, run_code with session_id).
type Sessions struct {
	Enabled bool `json:"enabled" jsonschema_description:"Offers session_open, session_close, session_list and run_code's session_id."`
	// MaxPerClient and MaxOpen bound the open sessions of one client
	// and of the whole server.
	MaxPerClient int `json:"max_per_client" jsonschema_description:"Most open sessions per client (per bearer token over HTTP)."`
	MaxOpen      int `json:"max_open" jsonschema_description:"Most open sessions on the server."`
	// IdleTTLSeconds ends a session not used for that long;
	// MaxLifetimeSeconds ends it however busy.
	IdleTTLSeconds     float64 `json:"idle_ttl_seconds" jsonschema_description:"A session not used for this long is closed; session_open may ask for less."`
	MaxLifetimeSeconds float64 `json:"max_lifetime_seconds" jsonschema_description:"A session is closed this long after it opened, however busy; its box is reaped by label after it even when the server that opened it is gone."`
	// Memory, Pids and WorkspaceBytes are a session box's limits; 0
	// means the limits of a one-off run. session_open may ask for less.
	Memory         ByteSize `json:"memory" jsonschema_description:"Memory limit of a session box (no swap); 0: limits.memory. session_open may ask for less."`
	Pids           int64    `json:"pids" jsonschema_description:"Most processes and threads in a session box; 0: limits.pids."`
	WorkspaceBytes ByteSize `json:"workspace_size" jsonschema_description:"Size of a session's /workspace tmpfs; 0: limits.workspace_size."`
	// Expose lets the person open a web server a session started.
	Expose Expose `json:"expose" jsonschema_description:"Previews: a session's web server opened by the person through a URL on the host, the box still sealed (off by default)."`
}

// IdleTTL is how long an unused session lives.
func (s Sessions) IdleTTL() time.Duration { return seconds(s.IdleTTLSeconds) }

// MaxLifetime is how long any session lives.
func (s Sessions) MaxLifetime() time.Duration { return seconds(s.MaxLifetimeSeconds) }

// DefaultSessions are the built-in session settings.
func DefaultSessions() Sessions {
	return Sessions{Enabled: true, MaxPerClient: 4, MaxOpen: 16, IdleTTLSeconds: 600, MaxLifetimeSeconds: 3600, Expose: DefaultExpose()}
}

// SessionLimits are a session box's limits: the manifest's, with the
// session's own caps where set.
func (m *Manifest) SessionLimits() Limits {
	l := m.Limits
	if s := m.Sessions; s.Memory > 0 {
		l.Memory = s.Memory
	}
	if s := m.Sessions; s.Pids > 0 {
		l.Pids = s.Pids
	}
	if s := m.Sessions; s.WorkspaceBytes > 0 {
		l.WorkspaceBytes = s.WorkspaceBytes
	}
	return l
}

func (s Sessions) validate(rangeI func(string, int64, int64, int64), rangeF func(string, float64, float64, float64), rangeB func(string, ByteSize, ByteSize, ByteSize)) {
	rangeI("sessions.max_per_client", int64(s.MaxPerClient), 1, 1024)
	rangeI("sessions.max_open", int64(s.MaxOpen), 1, 4096)
	rangeF("sessions.max_lifetime_seconds", s.MaxLifetimeSeconds, 10, 7*24*3600)
	rangeF("sessions.idle_ttl_seconds", s.IdleTTLSeconds, 1, s.MaxLifetimeSeconds)
	if s.Memory != 0 {
		rangeB("sessions.memory", s.Memory, 16*MiB, 64*GiB)
	}
	if s.Pids != 0 {
		rangeI("sessions.pids", s.Pids, 8, 32768)
	}
	if s.WorkspaceBytes != 0 {
		rangeB("sessions.workspace_size", s.WorkspaceBytes, 1*MiB, 16*GiB)
	}
}
