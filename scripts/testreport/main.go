// Command testreport reads `go test -json` on stdin and prints what a plain
// `go test` would (each package's closing line, and the whole output of a
// test that failed, unmixed with its parallel neighbours'), and writes each
// finished test's time to a file, so that `make test` can end with its
// slowest tests. It exits non-zero when a test or a package failed, or the
// stream ended without a package's verdict.
//
//	go test -json ./... | go run ./scripts/testreport -times .cache/logs/unit-times.tsv
package main

import (
	"bufio"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"os"
	"sort"
	"strings"
)

// event is one line of `go test -json` (cmd/test2json's TestEvent).
type event struct {
	Action  string
	Package string
	Test    string
	Elapsed float64
	Output  string
}

// timing is one finished test and how long it took.
type timing struct {
	name    string
	seconds float64
	result  string
}

func main() {
	times := flag.String("times", "", "write each finished test's seconds, result and name here (tab-separated)")
	flag.Parse()
	failed, err := report(os.Stdin, os.Stdout, *times)
	if err != nil {
		fmt.Fprintln(os.Stderr, "testreport:", err)
		os.Exit(2)
	}
	if failed {
		os.Exit(1)
	}
}

// report prints the plain output of the events read from in, writes the
// tests' times to timesPath (when set) and says whether anything failed.
func report(in io.Reader, out io.Writer, timesPath string) (failed bool, err error) {
	held := map[string]*strings.Builder{} // a running test's output, by package and name
	var done []timing
	verdicts := map[string]bool{} // packages that printed ok or FAIL
	started := map[string]bool{}
	sc := bufio.NewScanner(in)
	sc.Buffer(make([]byte, 1<<20), 64<<20)
	for sc.Scan() {
		line := sc.Bytes()
		var e event
		if json.Unmarshal(line, &e) != nil || e.Action == "" {
			// A build error or anything else go test printed as it is.
			fmt.Fprintln(out, string(line))
			continue
		}
		key := e.Package + " " + e.Test
		switch {
		case e.Test == "":
			started[e.Package] = true
			switch e.Action {
			case "output":
				fmt.Fprint(out, e.Output)
			case "pass", "skip":
				verdicts[e.Package] = true
			case "fail":
				verdicts[e.Package], failed = true, true
			}
		case e.Action == "output":
			b := held[key]
			if b == nil {
				b = &strings.Builder{}
				held[key] = b
			}
			b.WriteString(e.Output)
		case e.Action == "pass" || e.Action == "fail" || e.Action == "skip":
			done = append(done, timing{name: e.Test, seconds: e.Elapsed, result: e.Action})
			if e.Action == "fail" {
				failed = true
				if b := held[key]; b != nil {
					fmt.Fprint(out, b.String())
				}
			}
			delete(held, key)
		}
	}
	if err := sc.Err(); err != nil {
		return true, err
	}
	// Tests still running when the stream ended (the alarm's panic): say so.
	for key, b := range held {
		fmt.Fprintf(out, "--- UNFINISHED: %s\n%s", key, b.String())
		failed = true
	}
	for p := range started {
		if !verdicts[p] {
			fmt.Fprintf(out, "FAIL\t%s\t(no verdict: the test binary ended early)\n", p)
			failed = true
		}
	}
	if timesPath != "" {
		sort.Slice(done, func(i, j int) bool { return done[i].seconds > done[j].seconds })
		var b strings.Builder
		for _, d := range done {
			fmt.Fprintf(&b, "%.2f\t%s\t%s\n", d.seconds, d.result, d.name)
		}
		if err := os.WriteFile(timesPath, []byte(b.String()), 0o644); err != nil {
			return true, err
		}
	}
	return failed, nil
}
