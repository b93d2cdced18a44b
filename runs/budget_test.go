package runs

import (
	"testing"
	"time"

	"github.com/runbox-mcp/runbox/contract"

	"github.com/runbox-mcp/runbox/manifest"
)

func TestBudgets(t *testing.T) {
	now := time.Unix(0, 0)
	b := NewBudgets(manifest.Budgets{RunSeconds: 10, RunsPerMinute: 2})
	b.now = func() time.Time { return now }
	for i := 0; i < 2; i++ {
		if e := b.Admit("s1"); e != nil {
			t.Fatalf("run %d refused: %+v", i, e)
		}
	}
	if e := b.Admit("s1"); e == nil || e.Limit != contract.LimitBudget || e.Kind != contract.KindResourceLimit {
		t.Fatalf("third run in a minute admitted: %+v", e)
	}
	if e := b.Admit("s2"); e != nil {
		t.Fatalf("another session is charged: %+v", e)
	}
	now = now.Add(61 * time.Second)
	if e := b.Admit("s1"); e != nil {
		t.Fatalf("a minute later: %+v", e)
	}
	b.Charge("s1", 11*time.Second)
	now = now.Add(2 * time.Minute)
	if e := b.Admit("s1"); e == nil || e.Message != "this session has used its 10 seconds of run time" {
		t.Fatalf("run seconds: %+v", e)
	}
	if e := NewBudgets(manifest.Budgets{}).Admit("x"); e != nil {
		t.Fatalf("unlimited: %+v", e)
	}
}
