package contract

import (
	"fmt"
	"strconv"
	"strings"
)

// Display is one thing the code displayed (display(), a _repr_*_ method,
// matplotlib's show(), a session cell's last value, console.table), in the
// order the box produced them, with each of its representations.
type Display struct {
	Index int `json:"index" jsonschema_description:"The display's number in this run, from 0; its data is under runbox://runs/{run_id}/displays/{index}/."`
	// Source says what made it.
	Source string `json:"source" jsonschema:"enum=display,enum=show,enum=result,enum=table" jsonschema_description:"What made it: display() (or a _repr_ object shown by it), a matplotlib figure shown (plt.show() or left open), a session cell's last value, console.table."`
	After  After  `json:"after" jsonschema_description:"Where it falls in the output: the bytes each stream held when it was displayed."`
	// Mimes are its representations, by mime type.
	Mimes map[string]DisplayMime `json:"mimes" jsonschema_description:"Its representations by mime type: image/png, image/jpeg, image/svg+xml, text/html, text/markdown, text/latex, text/plain, application/json, application/vnd.runbox.table+json (a table)."`
	// Cut says why some of it was left out or refused (Display* reasons,
	// comma-separated when several).
	Cut string `json:"cut,omitempty" jsonschema_description:"Present when some of it was left out or refused, and why: count, bytes, invalid, invalid_data, invalid_utf8, pixels, image_bytes, answer_images, answer_text (comma-separated when several)."`
}

// After is where a display falls in the run's output.
type After struct {
	Stdout int64 `json:"stdout"`
	Stderr int64 `json:"stderr"`
}

// DisplayMime is one representation of a display.
type DisplayMime struct {
	Bytes int64 `json:"bytes" jsonschema_description:"The whole data's size."`
	// URI is the resource holding the whole data; absent when it was not
	// kept (its cut says why).
	URI    string `json:"uri,omitempty" jsonschema_description:"The resource (resources/read) holding the whole data; absent when it was not kept."`
	Width  int    `json:"width,omitempty" jsonschema_description:"An image's width in pixels, from its header."`
	Height int    `json:"height,omitempty" jsonschema_description:"An image's height in pixels, from its header."`
	// Text is a text representation's head (text/plain always; markdown,
	// latex and JSON when small).
	Text string `json:"text,omitempty" jsonschema_description:"The text itself (cut when long), for text/plain and for small markdown, latex and JSON."`
	// Rows and Columns are a table's whole shape.
	Rows    *int64 `json:"rows,omitempty" jsonschema_description:"A table's rows, all of them (the data may keep fewer)."`
	Columns *int64 `json:"columns,omitempty" jsonschema_description:"A table's columns, all of them."`
	// Markdown is a table's head as a markdown table, ending with its
	// whole shape (TableMarkdown): what a model reads of it.
	Markdown string `json:"markdown,omitempty" jsonschema_description:"A table's first rows and columns as a markdown table, ending with its whole shape: (R rows x C columns)."`
	// Data is the whole data, kept out of the structured result.
	Data []byte `json:"-"`
}

// Table is the data of a display of mime TableMime.
type Table struct {
	Columns []any `json:"columns"`
	Index   []any `json:"index,omitempty"`
	// IndexName names the index, when it has a name.
	IndexName any     `json:"index_name,omitempty"`
	Rows      [][]any `json:"rows"`
	Shape     []int64 `json:"shape"`
	Cut       string  `json:"cut,omitempty"`
}

// TableMime is the mime of a table display.
const TableMime = "application/vnd.runbox.table+json"

// Why a display, or part of it, was left out.
const (
	DisplayCutCount        = "count"         // past the displays or artifacts a run keeps
	DisplayCutBytes        = "bytes"         // its data was past the artifact byte budget: only its size is known
	DisplayCutInvalid      = "invalid"       // malformed, or a mime runbox does not take
	DisplayCutInvalidData  = "invalid_data"  // the data is not what its mime says (not a PNG, not a table): refused
	DisplayCutInvalidUTF8  = "invalid_utf8"  // text with invalid UTF-8: the bad bytes are replaced
	DisplayCutPixels       = "pixels"        // an image too large in pixels to show the model: kept as a resource
	DisplayCutImageBytes   = "image_bytes"   // an image over max_image_bytes: kept as a resource, not shown inline
	DisplayCutAnswerImages = "answer_images" // more images than an answer shows: kept as a resource
	DisplayCutAnswerText   = "answer_text"   // past the text the answer gives displays: kept as a resource
)

// AddCut adds a reason to a display's cut.
func (d *Display) AddCut(reason string) {
	for _, r := range strings.Split(d.Cut, ",") {
		if r == reason {
			return
		}
	}
	if d.Cut == "" {
		d.Cut = reason
	} else {
		d.Cut += "," + reason
	}
}

// DisplayURI is where a display's data of one mime can be read back.
func DisplayURI(runID string, index int, name string) string {
	return ArtifactURIPrefix + runID + "/displays/" + strconv.Itoa(index) + "/" + name
}

// DisplayURITemplate is the resource template that serves displays' data.
const DisplayURITemplate = ArtifactURIPrefix + "{run_id}/displays/{index}/{name}"

// ParseDisplayURI splits a display URI into its run, index and name.
func ParseDisplayURI(uri string) (runID string, index int, name string, ok bool) {
	rest, ok := strings.CutPrefix(uri, ArtifactURIPrefix)
	if !ok {
		return "", 0, "", false
	}
	runID, rest, ok = strings.Cut(rest, "/displays/")
	if !ok || runID == "" || strings.Contains(runID, "/") {
		return "", 0, "", false
	}
	i, name, ok := strings.Cut(rest, "/")
	index, err := strconv.Atoi(i)
	if !ok || err != nil || index < 0 || name == "" || strings.Contains(name, "/") {
		return "", 0, "", false
	}
	return runID, index, name, true
}

// DisplayMimeOrder is the order in which the summary considers a
// display's mimes: the richest form the model can read first.
var DisplayMimeOrder = []string{TableMime, "image/png", "image/jpeg", "image/svg+xml", "text/markdown", "text/latex", "application/json", "text/html", "text/plain"}

// sizeOf says an image's size, when known.
func sizeOf(m DisplayMime) string {
	if m.Width > 0 && m.Height > 0 {
		return fmt.Sprintf("%dx%d, ", m.Width, m.Height)
	}
	return ""
}
