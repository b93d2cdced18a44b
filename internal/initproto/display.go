package initproto

// Displays: what the code in a box shows the way a notebook does
// (display(), the _repr_*_ protocol, matplotlib's show(), console.table).
// The in-box libraries in DisplayLib write each display into a directory
// of its own under DisplaySpool (its data files, then display.json), and
// then DisplayMark with the directory's name on stdout, so runbox-init
// learns where the display falls in the output; it strips the mark from
// stdout. After the call, runbox-init reads the spool within the job's
// artifact budget and reports each display (Report.Displays), whose data
// travels as artifacts marked Display, after the workspace's files.
const (
	DisplayLib   = "/tmp/.runbox/display"
	DisplaySpool = "/tmp/.runbox/displays"
	// DisplayMark, then the display's directory name ([0-9-]) and BEL,
	// is written on stdout at the moment of display (an OSC sequence that
	// terminals ignore).
	DisplayMark = "\x1b]5379;runbox-display;"
	// DisplayMeta is the file in a display's directory that names its
	// source and its mimes' files; written last.
	DisplayMeta = "display.json"
	// MaxDisplays is the most displays one call reports; the rest are
	// counted in Report.DisplaysOmitted.
	MaxDisplays = 64
)

// Display is one display of a call, in the order the box produced them.
type Display struct {
	Source string `json:"source"`
	// Stdout and Stderr are the bytes each stream held when the display
	// was made.
	Stdout int64         `json:"stdout"`
	Stderr int64         `json:"stderr"`
	Mimes  []DisplayMime `json:"mimes"`
	// Cut says why some of the display was left out (contract's
	// Display* cut reasons).
	Cut string `json:"cut,omitempty"`
}

// DisplayMime is one representation of a display. Its data follows as an
// artifact marked Display, named "<display index>/<Name>", when Sent.
type DisplayMime struct {
	Mime string `json:"mime"`
	Name string `json:"name"`
	Size int64  `json:"size"`
	Sent bool   `json:"sent"`
}

// DisplayNames are the mimes a display may carry and the file each one's
// data is in; a mime outside them is refused.
var DisplayNames = map[string]string{
	"image/png":                         "image.png",
	"image/jpeg":                        "image.jpg",
	"image/svg+xml":                     "image.svg",
	"text/html":                         "index.html",
	"text/markdown":                     "text.md",
	"text/latex":                        "text.tex",
	"text/plain":                        "text.txt",
	"application/json":                  "data.json",
	"application/vnd.runbox.table+json": "table.json",
}
