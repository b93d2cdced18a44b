//go:build e2e

package e2e

import (
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

// viewFacts are what view/view.mjs read of the view's DOM in Chromium.
type viewFacts struct {
	ViewTools, PlainViewTools []string
	ViewMime                  string
	ViewBytes                 int
	ViewCsp                   map[string][]string
	RunStatus, Stdout, Theme  string
	RedSpan                   []string
	ArtifactImage             []int
	Metrics                   []string
	Downloads                 [][]any
	ArtifactSize              int
	ThemeAfter                string
	Sizes, LastHeight         int
	RunAgain                  struct {
		Calls  int
		Stdout string
	}
	ShotColours                 int
	CspAfterRun, CspHostile     *string
	SyntaxLine                  int
	Highlighted                 []int
	ErrorText                   string
	TableRows, CsvLines         int
	TableFirst, SortedFirst     []string
	SortedDescFirst             []string
	Page1, Page2                string
	RealDisplays                [][]string
	Interleaved, CarriedColour  []string
	PngMeta, PngRead            []int
	SeriesHead, SeriesFirst     []string
	CutNotes                    []string
	DisplayImages               [][]any
	Markdown                    []string
	MarkdownScripts, HTMLFrames int
	HTMLSandbox, HTMLText       []string
	InnerURLs                   []string
	TopURL                      string
	Cells                       [][]string
	Stray                       int
	RemoteRequests, Console     []string
	BlockedByPolicy, ConsoleOwn []string
}

// chromium finds Debian's chromium, which `make e2e-prep` installs.
func chromium(t *testing.T) string {
	for _, p := range []string{os.Getenv("CHROMIUM"), "/usr/bin/chromium", "/usr/bin/chromium-browser"} {
		if p != "" {
			if _, err := os.Stat(p); err == nil {
				return p
			}
		}
	}
	t.Fatal("no chromium: `make e2e-prep` installs it (scripts/chromium.sh)")
	return ""
}

// TestView draws runs in headless Chromium through a test host built on
// ext-apps' AppBridge, over streamable HTTP, and reads the view's DOM.
func TestView(t *testing.T) {
	if _, err := os.Stat("view/node_modules/playwright-core"); err != nil {
		t.Fatalf("the view's test host is not installed (make e2e-prep: npm ci in e2e/view): %v", err)
	}
	s := startNetServer(t, "http")
	shot := filepath.Join(t.TempDir(), "view.png")
	cmd := exec.Command("node", "view.mjs", "test", s.url("http"), testToken, shot)
	cmd.Dir = "view"
	cmd.Env = append(os.Environ(), "CHROMIUM="+chromium(t))
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("view.mjs: %v\n%s\n%s", err, out, exitStderr(err))
	}
	var f viewFacts
	if err := json.Unmarshal(out, &f); err != nil {
		t.Fatalf("facts: %v\n%s", err, out)
	}
	t.Logf("view: %d bytes, %s", f.ViewBytes, out)

	// Negotiated: only a client that declares the extension sees the view.
	if want := []string{"run_code", "run_wait", "session_close", "session_list", "session_open"}; !slices.Equal(f.ViewTools, want) {
		t.Errorf("tools pointing to the view: %v, want %v", f.ViewTools, want)
	}
	if len(f.PlainViewTools) != 0 {
		t.Errorf("a client without the extension sees the view on %v", f.PlainViewTools)
	}
	if f.ViewMime != "text/html;profile=mcp-app" || len(f.ViewCsp["connectDomains"]) != 0 || len(f.ViewCsp["resourceDomains"]) != 0 {
		t.Errorf("view resource: %s %v", f.ViewMime, f.ViewCsp)
	}
	// A real run: stdout with its colour, a PNG artifact read through the
	// host, metrics, the host's theme, "run again" as a tools/call.
	if f.RunStatus != "ok" || !strings.Contains(f.Stdout, "red and plain") {
		t.Errorf("run: %s stdout %q", f.RunStatus, f.Stdout)
	}
	if len(f.RedSpan) != 2 || f.RedSpan[0] != "red" || f.RedSpan[1] != "rgb(194, 54, 33)" {
		t.Errorf("ANSI red: %v", f.RedSpan)
	}
	if f.Theme != "dark" {
		t.Errorf("theme %q", f.Theme)
	}
	if !slices.Equal(f.ArtifactImage, []int{37, 23}) {
		t.Errorf("artifact image natural size %v, want 37x23", f.ArtifactImage)
	}
	if !slices.Contains(f.Metrics, "wall_ms") {
		t.Errorf("metrics %v", f.Metrics)
	}
	if len(f.Downloads) != 1 || f.Downloads[0][0] != "resource_link" || f.Downloads[0][1] != "out.png" || f.Downloads[0][2] != float64(f.ArtifactSize) {
		t.Errorf("download through the host: %v (artifact %d bytes)", f.Downloads, f.ArtifactSize)
	}
	if f.ThemeAfter != "light" {
		t.Errorf("the view did not follow the host's theme change: %q", f.ThemeAfter)
	}
	if f.Sizes == 0 || f.LastHeight <= 0 {
		t.Errorf("the view told the host no size: %d %d", f.Sizes, f.LastHeight)
	}
	if f.RunAgain.Calls != 1 || !strings.Contains(f.RunAgain.Stdout, "red and plain") {
		t.Errorf("run again: %+v", f.RunAgain)
	}
	if f.ShotColours < 8 {
		t.Errorf("the screenshot is blank: %d colours", f.ShotColours)
	}
	// A syntax error: the user's line is the one highlighted.
	if f.SyntaxLine == 0 || !slices.Equal(f.Highlighted, []int{f.SyntaxLine}) || !strings.Contains(f.ErrorText, "syntax") {
		t.Errorf("syntax error line %d, highlighted %v, %q", f.SyntaxLine, f.Highlighted, f.ErrorText)
	}
	// Displays of a real run, in the box's order: the figure shown, the
	// DataFrame, the hostile HTML, SVG and markdown, a PNG runbox refused,
	// the Series.
	wantDisplays := [][]string{
		{"show", "image/png", ""},
		{"display", "application/vnd.runbox.table+json text/plain", ""},
		{"display", "text/html", ""},
		{"display", "image/svg+xml", ""},
		{"display", "text/markdown", ""},
		{"display", "image/png", "invalid_data"},
		{"display", "application/vnd.runbox.table+json text/plain", ""},
	}
	// The refused PNG is its reason in words, with nothing to read.
	if !slices.EqualFunc(f.RealDisplays, wantDisplays, slices.Equal) || !slices.Equal(f.CutNotes, []string{"its data is not what its mime says"}) {
		t.Errorf("displays of the run: %v (cut notes %v)", f.RealDisplays, f.CutNotes)
	}
	// A display falls in stdout after the text printed before it, and
	// before the text printed after it; one shown after all the output
	// follows it. The colour the first piece set goes on in the next.
	wantPlaces := []string{"text red a\n", "display image/png in stdout", "text still red b\n", "display text/markdown in displays"}
	if !slices.Equal(f.Interleaved, wantPlaces) {
		t.Errorf("displays' places in the output: %q, want %q", f.Interleaved, wantPlaces)
	}
	if !slices.Equal(f.CarriedColour, []string{"still red", "rgb(194, 54, 33)"}) {
		t.Errorf("the colour across a display: %q", f.CarriedColour)
	}
	// plt.show() of a 3.2x2.1 inch figure at 100 dpi: the PNG the view read
	// through the host, the size the result gives and the <img> agree.
	if !slices.Equal(f.PngMeta, []int{320, 210}) || !slices.Equal(f.PngRead, f.PngMeta) ||
		len(f.DisplayImages) != 2 || f.DisplayImages[0][1] != float64(320) || f.DisplayImages[0][2] != float64(210) || f.DisplayImages[1][1] != float64(40) {
		t.Errorf("figure: result %v, read %v, images %v", f.PngMeta, f.PngRead, f.DisplayImages)
	}
	// display(df) of 120 rows: paged (50 rows a page), sorted both ways,
	// copied as CSV (a header and 120 rows).
	if f.TableRows != 50 || !slices.Equal(f.TableFirst, []string{"row0", "0"}) || f.Page1 != "page 1 of 3" || len(f.SortedFirst) != 2 || f.SortedFirst[1] != "0" ||
		len(f.SortedDescFirst) != 2 || f.SortedDescFirst[1] != "100" || f.Page2 != "page 2 of 3" || f.CsvLines != 121 {
		t.Errorf("table: rows %d first %v %q sorted %v %v %q csv %d", f.TableRows, f.TableFirst, f.Page1, f.SortedFirst, f.SortedDescFirst, f.Page2, f.CsvLines)
	}
	// A Series with a named index: the index is a column, named.
	if !slices.Equal(f.SeriesHead, []string{"key", "v"}) || !slices.Equal(f.SeriesFirst, []string{"a", "3"}) {
		t.Errorf("series: head %v first %v", f.SeriesHead, f.SeriesFirst)
	}
	if len(f.Markdown) != 2 || f.Markdown[0] != "bold item" || f.MarkdownScripts != 0 {
		t.Errorf("markdown %v (%d live elements)", f.Markdown, f.MarkdownScripts)
	}
	// Hostile displays: nothing ran, nothing reached the host, nothing
	// remote was fetched, the frame stayed where it was.
	if f.Stray != 0 {
		t.Errorf("%d messages reached the host from box content", f.Stray)
	}
	if len(f.RemoteRequests) != 0 {
		t.Errorf("remote requests: %v", f.RemoteRequests)
	}
	if f.HTMLFrames != 1 || !slices.Equal(f.HTMLSandbox, []string{""}) || len(f.HTMLText) != 1 || !strings.Contains(f.HTMLText[0], "html display") {
		t.Errorf("html frame: %d %v %q", f.HTMLFrames, f.HTMLSandbox, f.HTMLText)
	}
	for _, txt := range f.HTMLText {
		if strings.Contains(txt, "RAN") {
			t.Errorf("box content ran: %q", txt)
		}
	}
	for _, u := range f.InnerURLs {
		if u != "about:srcdoc" {
			t.Errorf("a box frame navigated to %s", u)
		}
	}
	if f.TopURL != "about:blank" {
		t.Errorf("the host page navigated to %s", f.TopURL)
	}
	if f.CspAfterRun != nil {
		t.Errorf("the view broke its own policy %s times", *f.CspAfterRun)
	}
	if !slices.Contains(f.BlockedByPolicy, "https://example.com/remote.png") {
		t.Errorf("the remote image was not refused by the policy: %v", f.BlockedByPolicy)
	}
	// The view itself keeps to its policy: the console of the runs
	// before any hostile display holds no refusal.
	for _, c := range f.ConsoleOwn {
		if strings.Contains(c, "Content Security Policy") || strings.Contains(c, "Refused") {
			t.Errorf("the view broke its own policy: %s", c)
		}
	}
	// A session: the agent's cell and one typed in the view, same state.
	if len(f.Cells) != 2 || f.Cells[0][0] != "1" || !strings.Contains(f.Cells[0][1], "cell one") || f.Cells[1][0] != "2" || strings.TrimSpace(f.Cells[1][1]) != "42" {
		t.Errorf("cells %v", f.Cells)
	}
}

func exitStderr(err error) string {
	if ee, ok := err.(*exec.ExitError); ok {
		return string(ee.Stderr)
	}
	return ""
}
