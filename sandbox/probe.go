package sandbox

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/runbox-mcp/runbox/contract"

	"github.com/runbox-mcp/runbox/manifest"
)

// LanguageInfo is what an image says about a language: the interpreter's
// version and the packages installed for it.
type LanguageInfo struct {
	Version  string   `json:"version"`
	Packages []string `json:"packages"`
}

// probes ask the interpreter itself, in a box like any other, what it is
// and what it has. Each prints one JSON LanguageInfo.
var probes = map[string]string{
	"python": `import sys, json, importlib.metadata as md
names = {}
for d in md.distributions():
    n = d.metadata["Name"]
    if n:
        names[n.lower()] = d.version
print(json.dumps({"version": "Python " + sys.version.split()[0], "packages": [n + " " + v for n, v in sorted(names.items())]}))
`,
	// Node: npm, when an npm on PATH is a real npm (its package.json).
	"node": `const fs = require("fs"), path = require("path");
const packages = [];
for (const dir of (process.env.PATH || "").split(":")) {
  try {
    const p = JSON.parse(fs.readFileSync(path.join(path.dirname(fs.realpathSync(path.join(dir, "npm"))), "..", "package.json"), "utf8"));
    if (p.name === "npm") { packages.push("npm " + p.version); break; }
  } catch {}
}
console.log(JSON.stringify({version: "Node.js " + process.version, packages}));
`,
	// TypeScript: the compiler's version, and the declarations it checks
	// against, from the image's packages (images/sandbox/npm.txt).
	"typescript": `const fs = require("fs");
const version = (name: string): string | null => {
  try {
    return JSON.parse(fs.readFileSync("/usr/lib/node_modules/" + name + "/package.json", "utf8")).version;
  } catch {
    return null;
  }
};
const packages: string[] = [];
for (const n of ["typescript", "@types/node"]) {
  const v = version(n);
  if (v) packages.push(n + " " + v);
}
console.log(JSON.stringify({version: "TypeScript " + (version("typescript") || "?") + " on Node.js " + process.version, packages}));
`,
	// bash: curl, when there is one.
	"bash": `p=
if v=$(curl --version 2>/dev/null); then v=${v#curl }; p="\"curl ${v%% *}\""; fi
printf '{"version":"bash %s","packages":[%s]}\n' "${BASH_VERSION%%(*}" "$p"
`,
}

// Probe reads a language's version and packages from its image, running
// a probe in a box. Results are cached on disk by image digest, so an
// image is probed once; the last result for the image's name is kept too,
// for LastProbe.
func Probe(ctx context.Context, r Runner, digest func(context.Context, string) (string, error), lang manifest.Language, timeout time.Duration) (LanguageInfo, error) {
	code, ok := probes[lang.ErrorFormat]
	if !ok {
		return LanguageInfo{}, fmt.Errorf("no probe for %s", lang.ErrorFormat)
	}
	id, err := digest(ctx, lang.Image)
	if err != nil {
		return LanguageInfo{}, err
	}
	cache := probeCache(id, lang, code)
	if info, ok := readProbe(cache); ok {
		writeProbe(lastProbeCache(lang, code), info)
		return info, nil
	}
	res := r.Run(ctx, RunRequest{Job: contract.Job{RunID: "probe-" + lang.Name, Language: lang, Code: code, Timeout: timeout}})
	if res.Status != contract.StatusOK {
		msg := res.Stderr
		if res.Error != nil {
			msg = res.Error.Message
		}
		return LanguageInfo{}, fmt.Errorf("probing %s in %s: %s", lang.Name, lang.Image, msg)
	}
	var info LanguageInfo
	if err := json.Unmarshal([]byte(res.Stdout), &info); err != nil || info.Version == "" {
		return LanguageInfo{}, fmt.Errorf("probing %s: unreadable answer %q", lang.Name, res.Stdout)
	}
	writeProbe(cache, info)
	writeProbe(lastProbeCache(lang, code), info)
	return info, nil
}

// LastProbe is what the last probe of the language's image, by its name,
// read: at start-up it describes the image before the engine is asked
// (the image rarely changes), and Probe then confirms or corrects it.
func LastProbe(lang manifest.Language) (LanguageInfo, bool) {
	code, ok := probes[lang.ErrorFormat]
	if !ok {
		return LanguageInfo{}, false
	}
	return readProbe(lastProbeCache(lang, code))
}

// probeCache is the file of a probe's result for an image (its digest, or
// its name for LastProbe); "" when there is no cache directory.
func probeCache(image string, lang manifest.Language, code string) string {
	dir, err := os.UserCacheDir()
	if err != nil {
		return ""
	}
	key := sha256.Sum256([]byte(image + "\x00" + lang.Name + "\x00" + strings.Join(lang.Command, " ") + "\x00" + code))
	return filepath.Join(dir, "runbox", "probes", hex.EncodeToString(key[:12])+".json")
}

// lastProbeCache is the file of the last probe of the language's image by
// its name, whatever its digest.
func lastProbeCache(lang manifest.Language, code string) string {
	return probeCache("last\x00"+lang.Image, lang, code)
}

func readProbe(path string) (LanguageInfo, bool) {
	var info LanguageInfo
	if path == "" {
		return info, false
	}
	b, err := os.ReadFile(path)
	if err != nil || json.Unmarshal(b, &info) != nil || info.Version == "" {
		return LanguageInfo{}, false
	}
	return info, true
}

func writeProbe(path string, info LanguageInfo) {
	if path == "" {
		return
	}
	b, _ := json.Marshal(info)
	if os.MkdirAll(filepath.Dir(path), 0o755) == nil {
		_ = os.WriteFile(path, b, 0o644)
	}
}
