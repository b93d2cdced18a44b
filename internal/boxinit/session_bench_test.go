//go:build linux

package boxinit

import (
	"testing"
)

// BenchmarkSessionCell is runbox-init's side of a session cell, print(1)
// or its like, outside a box: the call algorithm and the driver.
func BenchmarkSessionCell(b *testing.B) {
	for _, c := range []struct{ driver, interpreter, code string }{
		{"python", "python3", "print(1)"},
		{"node", "node", "console.log(1)"},
		{"bash", "bash", "echo 1"},
	} {
		b.Run(c.driver, func(b *testing.B) {
			_, run := newTestSession(b, c.driver, c.interpreter)
			if rep := run(c.code, cellTimeout); string(rep.Stdout) != "1\n" {
				b.Fatalf("first cell: %q %q", rep.Stdout, rep.Stderr)
			}
			b.ResetTimer()
			for b.Loop() {
				if rep := run(c.code, cellTimeout); string(rep.Stdout) != "1\n" {
					b.Fatalf("cell: %q %q", rep.Stdout, rep.Stderr)
				}
			}
		})
	}
}
