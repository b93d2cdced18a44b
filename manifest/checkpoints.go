package manifest

import "time"

// Checkpoints bounds the session checkpoints kept in the state directory
// (session_checkpoint, session_restore, session_fork).
type Checkpoints struct {
	Enabled bool `json:"enabled" jsonschema_description:"Offers session_checkpoint, session_restore and session_fork (with sessions on)."`
	// MaxPerClient and MaxTotal bound how many are kept; MaxBytes their
	// size on disk; MaxAgeSeconds how long one is kept.
	MaxPerClient   int      `json:"max_per_client" jsonschema_description:"Most checkpoints kept per client (per bearer token over HTTP); one more is refused until one expires."`
	MaxTotal       int      `json:"max_total" jsonschema_description:"Most checkpoints kept on the server."`
	MaxBytes       ByteSize `json:"max_bytes" jsonschema_description:"Most bytes of checkpoints kept on the server (the gVisor images of the interpreters' memory)."`
	MaxClientBytes ByteSize `json:"max_client_bytes" jsonschema_description:"Most bytes of checkpoints kept per client."`
	MaxAgeSeconds  float64  `json:"max_age_seconds" jsonschema_description:"A checkpoint is deleted this long after it was taken."`
}

// MaxAge is how long a checkpoint is kept.
func (c Checkpoints) MaxAge() time.Duration { return seconds(c.MaxAgeSeconds) }

// DefaultCheckpoints are the built-in checkpoint settings.
func DefaultCheckpoints() Checkpoints {
	return Checkpoints{Enabled: true, MaxPerClient: 8, MaxTotal: 64, MaxBytes: 4 * GiB, MaxClientBytes: 1 * GiB, MaxAgeSeconds: 24 * 3600}
}

func (c Checkpoints) validate(rangeI func(string, int64, int64, int64), rangeF func(string, float64, float64, float64), rangeB func(string, ByteSize, ByteSize, ByteSize)) {
	rangeI("checkpoints.max_per_client", int64(c.MaxPerClient), 1, 1024)
	rangeI("checkpoints.max_total", int64(c.MaxTotal), 1, 65536)
	rangeB("checkpoints.max_bytes", c.MaxBytes, 16*MiB, 16*1024*GiB)
	rangeB("checkpoints.max_client_bytes", c.MaxClientBytes, 16*MiB, c.MaxBytes)
	rangeF("checkpoints.max_age_seconds", c.MaxAgeSeconds, 60, 365*24*3600)
}
