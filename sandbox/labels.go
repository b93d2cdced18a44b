package sandbox

// Label keys on every container and volume runbox creates, so a restarted
// server can tell its own leftovers and reap them.
const (
	LabelManaged   = "io.runbox.managed"
	LabelInstance  = "io.runbox.instance"
	LabelOwnerHost = "io.runbox.owner.host"
	LabelOwnerPID  = "io.runbox.owner.pid"
	// LabelOwnerStart is the owner's start time (clock ticks since boot),
	// so a reused pid is not mistaken for a live owner.
	LabelOwnerStart = "io.runbox.owner.start"
	LabelRunID      = "io.runbox.run"
	// LabelKept marks a box whose run a server's store keeps ([Driver].MarkKept),
	// with the state directory of that store ([StateKey]); Docker, whose
	// labels are fixed at creation, carries it in the box's name instead
	// (runbox-kept-<state>-<id>).
	LabelKept     = "io.runbox.kept"
	LabelLanguage = "io.runbox.language"
	// LabelInitSHA marks the volume that carries runbox-init, with the
	// binary's sha256.
	LabelInitSHA = "io.runbox.init.sha256"
	// LabelFolder marks a volume that binds a host folder (a declared
	// folder or a client's root) into boxes, with the folder's path.
	LabelFolder = "io.runbox.folder"
)

// Paths inside a box.
const (
	// InitDir is where the runbox-init volume is mounted, read-only.
	InitDir  = "/.runbox"
	InitPath = InitDir + "/runbox-init"
)
