package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func TestReport(t *testing.T) {
	in := `{"Action":"start","Package":"p"}
{"Action":"run","Package":"p","Test":"TestA"}
{"Action":"output","Package":"p","Test":"TestA","Output":"=== RUN   TestA\n"}
{"Action":"run","Package":"p","Test":"TestB"}
{"Action":"output","Package":"p","Test":"TestB","Output":"    b_test.go:9: boom\n"}
{"Action":"output","Package":"p","Test":"TestA","Output":"    a_test.go:3: quiet\n"}
{"Action":"output","Package":"p","Test":"TestB","Output":"--- FAIL: TestB (2.50s)\n"}
{"Action":"fail","Package":"p","Test":"TestB","Elapsed":2.5}
{"Action":"pass","Package":"p","Test":"TestA","Elapsed":7.25}
{"Action":"output","Package":"p","Output":"FAIL\tp\t9.9s\n"}
{"Action":"fail","Package":"p","Elapsed":9.9}
# q [q.test]
{"Action":"start","Package":"q"}
{"Action":"run","Package":"q","Test":"TestHangs"}
{"Action":"output","Package":"q","Test":"TestHangs","Output":"panic: test timed out\n"}
`
	var out strings.Builder
	times := filepath.Join(t.TempDir(), "times.tsv")
	failed, err := report(strings.NewReader(in), &out, times)
	if err != nil || !failed {
		t.Fatalf("failed %v, err %v", failed, err)
	}
	got := out.String()
	for _, want := range []string{"b_test.go:9: boom\n--- FAIL: TestB (2.50s)\n", "FAIL\tp\t9.9s\n", "# q [q.test]\n",
		"--- UNFINISHED: q TestHangs\npanic: test timed out\n", "FAIL\tq\t(no verdict"} {
		if !strings.Contains(got, want) {
			t.Errorf("output lacks %q:\n%s", want, got)
		}
	}
	if strings.Contains(got, "quiet") {
		t.Errorf("a passing test's output was printed:\n%s", got)
	}
	b, _ := os.ReadFile(times)
	if string(b) != "7.25\tpass\tTestA\n2.50\tfail\tTestB\n" {
		t.Errorf("times:\n%s", b)
	}
	failed, err = report(strings.NewReader(`{"Action":"start","Package":"p"}
{"Action":"pass","Package":"p","Test":"TestA","Elapsed":1}
{"Action":"output","Package":"p","Output":"ok  \tp\t1.0s\n"}
{"Action":"pass","Package":"p","Elapsed":1}
`), &out, "")
	if err != nil || failed {
		t.Errorf("a passing run: failed %v, err %v", failed, err)
	}
}
