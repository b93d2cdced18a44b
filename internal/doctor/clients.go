package doctor

import (
	"errors"
	"fmt"
	"io/fs"
	"os"

	"github.com/runbox-mcp/runbox/internal/clientconfig"
)

// ClientFiles says where each MCP client reads its servers on this
// machine (clientconfig.Path with the real home and environment).
type ClientFiles func(clientconfig.Client) (string, error)

// clientChecks report, for each client whose file is there, whether it
// starts runbox, with a binary that exists. Claude Desktop is always
// reported: its file moved with its MSIX package on Windows, and a user
// who wrote the old one sees why runbox is missing. Never a failure: a
// machine may serve runbox to no local client at all.
func clientChecks(files ClientFiles, name string) []Check {
	if files == nil {
		return nil
	}
	var out []Check
	for _, c := range clientconfig.Clients {
		p, err := files(c)
		if err != nil {
			continue
		}
		check := Check{Name: "client " + string(c)}
		content, err := os.ReadFile(p)
		switch {
		case errors.Is(err, fs.ErrNotExist):
			if c != clientconfig.ClaudeDesktop {
				continue
			}
			check.Status, check.Detail = Warn, fmt.Sprintf("%s reads %s, which does not exist", c, p)
			check.Fix = fmt.Sprintf("runbox config %s --write", c)
		case err != nil:
			check.Status, check.Detail = Warn, err.Error()
		default:
			srv, ok, err := clientconfig.Lookup(c, content, name)
			switch {
			case err != nil:
				check.Status, check.Detail = Warn, fmt.Sprintf("%s is not valid JSON: %v", p, err)
				check.Fix = "Fix the file, then `runbox config " + string(c) + " --write`."
			case !ok:
				check.Status, check.Detail = Warn, fmt.Sprintf("%s has no %q server", p, name)
				check.Fix = fmt.Sprintf("runbox config %s --write", c)
			default:
				if _, err := os.Stat(srv.Command); err != nil {
					check.Status, check.Detail = Warn, fmt.Sprintf("%s starts %s, which is not there", p, srv.Command)
					check.Fix = fmt.Sprintf("runbox config %s --write", c)
				} else {
					check.Status, check.Detail = OK, fmt.Sprintf("%s starts %s %v", p, srv.Command, srv.Args)
				}
			}
		}
		out = append(out, check)
	}
	return out
}
