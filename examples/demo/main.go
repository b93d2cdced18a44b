// Command demo is a real MCP session with runbox: it starts `runbox serve`
// over stdio with mcp-go's client, lists the tools, and makes the calls an
// agent would, printing what the agent sees.
//
//	go run ./examples/demo --server bin/runbox
package main

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"flag"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"time"

	"github.com/mark3labs/mcp-go/client"
	"github.com/mark3labs/mcp-go/client/transport"
	"github.com/mark3labs/mcp-go/mcp"
)

type call struct {
	title string
	args  map[string]any
	// tool is the tool to call; default run_code. A session_id of
	// sessionID is replaced by the id session_open answered.
	tool string
}

const sessionID = "{the session_open answer's id}"

var calls = []call{
	{"A computation", map[string]any{"language": "python", "code": `import pandas as pd, numpy as np
df = pd.DataFrame({"x": np.arange(1, 6)})
df["square"] = df.x ** 2
print(df.to_string(index=False))
print("sum of squares:", df.square.sum())`}, ""},
	{"A plot, returned as an image", map[string]any{"language": "python", "code": `import matplotlib.pyplot as plt, numpy as np
x = np.linspace(0, 2 * np.pi, 200)
plt.plot(x, np.sin(x), label="sin")
plt.plot(x, np.cos(x), label="cos")
plt.legend(); plt.title("runbox")
plt.savefig("plot.png", dpi=80)
print("saved plot.png")`}, ""},
	{"A syntax error, with its line", map[string]any{"language": "javascript", "code": "const xs = [1, 2, 3];\nconst total = xs.reduce((a, b) => a + b, 0;\nconsole.log(total);\n"}, ""},
	{"A runtime error, in the agent's own line", map[string]any{"language": "python", "code": "rates = {'a': 1}\n\ndef ratio(k):\n    return 10 / rates.get(k, 0)\n\nprint(ratio('b'))\n"}, ""},
	{"A timeout", map[string]any{"language": "bash", "code": "echo working; while true; do :; done", "timeout_seconds": 2}, ""},
	{"An out-of-memory kill", map[string]any{"language": "python", "code": "blocks = []\nwhile True:\n    blocks.append(bytearray(64 * 1024 * 1024))\n"}, ""},
	{"Output longer than the answer shows: its head and tail, and where all of it is", map[string]any{"language": "python",
		"code": "for i in range(3000):\n    print(f'row {i:04d}: ' + 'x' * 30)\nprint('done: 3000 rows')"}, ""},
	{"A bad request (never reaches a box)", map[string]any{"language": "python", "code": "print(1)", "files": []any{map[string]any{"path": "../etc/passwd", "content": "x"}}}, ""},
	{"A session: one interpreter across calls", map[string]any{"language": "python"}, "session_open"},
	{"In the session: load the data once (a cell's last expression is shown)", map[string]any{"language": "python", "session_id": sessionID,
		"code": "import pandas as pd\nsales = pd.DataFrame({'region': ['north', 'south', 'north'], 'amount': [3, 4, 5]})\nlen(sales)"}, ""},
	{"In the session: the data is still there", map[string]any{"language": "python", "session_id": sessionID,
		"code": "sales.groupby('region').amount.sum()"}, ""},
	{"Close the session", map[string]any{"session_id": sessionID}, "session_close"},
}

func main() {
	server := flag.String("server", "bin/runbox", "path of the runbox binary")
	outDir := flag.String("out", ".cache/demo", "where to save images the agent receives")
	flag.Parse()
	if err := demo(*server, *outDir); err != nil {
		fmt.Fprintln(os.Stderr, "demo:", err)
		os.Exit(1)
	}
}

func demo(serverBin, outDir string) error {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	logPath := filepath.Join(outDir, "server.log")
	if err := os.MkdirAll(outDir, 0o755); err != nil {
		return err
	}
	logFile, err := os.Create(logPath)
	if err != nil {
		return err
	}
	defer logFile.Close()
	c, err := client.NewStdioMCPClientWithOptions(serverBin, nil, []string{"serve"},
		transport.WithCommandFunc(func(ctx context.Context, command string, env, args []string) (*exec.Cmd, error) {
			cmd := exec.CommandContext(ctx, command, args...)
			cmd.Env = append(os.Environ(), env...)
			cmd.Stderr = logFile // the server logs to stderr; stdout is the protocol
			return cmd, nil
		}))
	if err != nil {
		return err
	}
	defer c.Close()

	init := mcp.InitializeRequest{}
	init.Params.ProtocolVersion = mcp.LATEST_PROTOCOL_VERSION
	init.Params.ClientInfo = mcp.Implementation{Name: "runbox-demo", Version: "1"}
	info, err := c.Initialize(ctx, init)
	if err != nil {
		return fmt.Errorf("initialize: %w", err)
	}
	fmt.Printf("== connected to %s %s over stdio (protocol %s)\n", info.ServerInfo.Name, info.ServerInfo.Version, info.ProtocolVersion)
	tools, err := c.ListTools(ctx, mcp.ListToolsRequest{})
	if err != nil {
		return err
	}
	for _, t := range tools.Tools {
		fmt.Printf("== tool %q — what the agent is told:\n%s\n", t.Name, indent(t.Description))
	}
	session := ""
	for i, cl := range calls {
		tool := cl.tool
		if tool == "" {
			tool = "run_code"
		}
		if cl.args["session_id"] == sessionID {
			cl.args["session_id"] = session
		}
		args, _ := json.Marshal(cl.args)
		fmt.Printf("\n== %d. %s\n-> %s %s\n", i+1, cl.title, tool, args)
		req := mcp.CallToolRequest{}
		req.Params.Name = tool
		req.Params.Arguments = cl.args
		start := time.Now()
		res, err := c.CallTool(ctx, req)
		if err != nil {
			return fmt.Errorf("call %d: %w", i+1, err)
		}
		fmt.Printf("<- isError=%v after %d ms\n", res.IsError, time.Since(start).Milliseconds())
		for _, content := range res.Content {
			if t, ok := mcp.AsTextContent(content); ok {
				fmt.Println(indent(t.Text))
			}
			if img, ok := mcp.AsImageContent(content); ok {
				data, _ := base64.StdEncoding.DecodeString(img.Data)
				p := filepath.Join(outDir, fmt.Sprintf("call%d.png", i+1))
				_ = os.WriteFile(p, data, 0o644)
				fmt.Printf("   [image content: %s, %d bytes, saved to %s]\n", img.MIMEType, len(data), p)
			}
		}
		var sc struct {
			Error   json.RawMessage `json:"error"`
			Metrics json.RawMessage `json:"metrics"`
			// A session call's place in its session.
			Session json.RawMessage `json:"session"`
		}
		raw, _ := json.Marshal(res.StructuredContent)
		_ = json.Unmarshal(raw, &sc)
		if tool == "session_open" {
			var opened struct {
				Session struct {
					ID string `json:"session_id"`
				} `json:"session"`
			}
			_ = json.Unmarshal(raw, &opened)
			session = opened.Session.ID
		}
		if tool != "run_code" {
			continue
		}
		fmt.Printf("   structuredContent.error   = %s\n   structuredContent.metrics = %s\n", sc.Error, sc.Metrics)
		if len(sc.Session) > 0 {
			fmt.Printf("   structuredContent.session = %s\n", sc.Session)
		}
	}
	fmt.Printf("\n== done; server log in %s\n", logPath)
	return nil
}

func indent(s string) string {
	return "   " + strings.ReplaceAll(strings.TrimRight(s, "\n"), "\n", "\n   ")
}
