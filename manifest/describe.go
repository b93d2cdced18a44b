package manifest

import (
	"fmt"
	"strings"
)

// Describe renders what the sandbox has and the rules it enforces, from
// the manifest, so that what the agent is told is what is enforced:
// run_code's description but for the error kinds, which the contract adds
// (contract.ToolDescription).
func (m *Manifest) Describe() string {
	l := m.Limits
	var b strings.Builder
	b.WriteString("Run code in a fresh, isolated sandbox and get back stdout, stderr, the exit code, the files it wrote, metrics, and a typed error to act on.\n\n")
	if m.Network.Enabled() && (m.Network.Index.Python != "" || m.Network.Index.NPM != "") {
		b.WriteString("Installed (more only from the declared package indexes below):\n")
	} else {
		b.WriteString("Installed (nothing else can be installed):\n")
	}
	for _, lang := range m.Languages {
		fmt.Fprintf(&b, "- %s", lang.Name)
		if lang.Version != "" {
			fmt.Fprintf(&b, " (%s)", lang.Version)
		}
		if len(lang.Packages) > 0 {
			fmt.Fprintf(&b, " with %s", strings.Join(lang.Packages, ", "))
		}
		b.WriteString("\n")
	}
	b.WriteString(m.Packages.describe())
	b.WriteString("\nRules, enforced on every run:\n")
	b.WriteString(m.Network.describe())
	fmt.Fprintf(&b, "- Time: %gs by default; set timeout_seconds up to %g.\n", l.TimeoutSeconds, l.MaxTimeoutSeconds)
	if l.AnswerWithinSeconds > 0 {
		fmt.Fprintf(&b, "- Long runs: a run still going after %gs answers status \"running\" with its run_id and its output so far, and goes on in the background; call run_wait with that run_id until it answers the full result (each call waits up to %gs), or run_cancel to stop it; a running run and its result outlive a restart of this server. At most %d such runs of yours at once. (A client that waits longer may set the tools/call _meta key io.runbox/answer_within_seconds: seconds to wait before answering running, 0 for the run's end.)\n", l.AnswerWithinSeconds, l.AnswerWithinSeconds, l.MaxBackgroundRunsPerClient)
	}
	fmt.Fprintf(&b, "- Memory %s, %g CPU, %d processes/threads, disk %s in /workspace and %s in /tmp.\n", l.Memory, l.CPUs, l.Pids, l.WorkspaceBytes, l.TmpBytes)
	fmt.Fprintf(&b, "- Output: the answer shows %d characters of stdout and stderr (head and tail; the result says what is cut and names a runbox:// resource with the rest); the first and last %s of each stream are kept. Print summaries, not whole datasets.\n", l.AnswerChars, l.OutputBytes/2)
	fmt.Fprintf(&b, "- Every run starts from an empty /workspace (the working directory); nothing persists between runs. Pass data with files (up to %s in all) and stdin.\n", l.InputBytes)
	for _, mt := range m.Mounts {
		fmt.Fprintf(&b, "- %s: a read-only folder of the user's data; read it there (or name a file in it with a files entry's source) instead of passing its content.\n", mt.Target())
	}
	if m.Roots.Mount {
		fmt.Fprintf(&b, "- %s/<name>: your client's roots (e.g. the open project), read-only, when they are folders of this server's host; the result's roots (and session_open's) name them.\n", RootsDir)
	}
	if m.Outputs != "" {
		b.WriteString("- save_artifacts: true also saves the run's artifacts in the user's outputs folder.\n")
	}
	if m.Sessions.Enabled {
		b.WriteString("- To keep state across calls (load data once, explore it over many calls), open a session with session_open and pass its session_id: the same interpreter runs each call.\n")
	}
	fmt.Fprintf(&b, "- Files the code writes under /workspace come back as artifacts (up to %d files, %s); images are shown inline. Save plots with matplotlib's savefig('plot.png').\n", l.Artifacts, l.ArtifactBytes)
	b.WriteString("- Displays come back in the result's displays, in order: plt.show() (and figures left open) as images; in Python display(obj) shows a pandas frame as a table, an image, HTML, markdown (the _repr_*_ protocol); in JavaScript display({\"image/png\": base64, \"text/html\": ...}) and console.table. A table reaches you as markdown with its whole shape.\n")
	return b.String()
}
