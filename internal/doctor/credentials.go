package doctor

import (
	"fmt"
	"os"

	"github.com/runbox-mcp/runbox/egress"
	"github.com/runbox-mcp/runbox/manifest"
)

// credentialChecks says, for each network entry with a credential, where
// its secret comes from and whether it is there: never the value. A
// missing one fails, as it fails the server's start.
func credentialChecks(m *manifest.Manifest, lookupEnv func(string) (string, bool), rep *Report) {
	for _, st := range egress.CheckCredentials(m.Network, lookupEnv) {
		c := Check{Name: "credential", Status: OK, Detail: fmt.Sprintf("%s: %s header from %s: present", st.Entry, st.Header, st.Source)}
		if !st.Present {
			c.Status, c.Detail = Fail, fmt.Sprintf("%s: %s header from %s: missing (%s)", st.Entry, st.Header, st.Source, st.Problem)
			c.Fix = "Set it in the environment runbox starts in (the MCP client's server entry: env), or point the credential at a readable file."
		}
		rep.add(c)
	}
}

// lookupEnv is the process's environment; tests replace it.
var lookupEnv = os.LookupEnv
