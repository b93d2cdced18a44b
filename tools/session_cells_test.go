package tools

import (
	"context"
	"encoding/json"
	"errors"
	"testing"

	"github.com/mark3labs/mcp-go/mcp"
	"github.com/mark3labs/mcp-go/server"

	"github.com/runbox-mcp/runbox/contract"
)

// cellLog is one session of alice's with two cells.
type cellLog struct{}

func (cellLog) SessionCells(id, client string) (contract.SessionCells, bool) {
	if id != "s_1" || client != "alice" {
		return contract.SessionCells{}, false
	}
	return contract.SessionCells{SessionID: id, Cells: []contract.SessionCell{{Seq: 1, Code: "x = 1"}, {Seq: 2, Code: "print(x)"}}}, true
}

func TestSessionCellsTemplate(t *testing.T) {
	h := SessionCellsTemplate(cellLog{}).Handler
	read := func(who, uri string) ([]mcp.ResourceContents, error) {
		var req mcp.ReadResourceRequest
		req.Params.URI = uri
		return h(WithPrincipal(context.Background(), who), req)
	}
	got, err := read("alice", contract.SessionCellsURI("s_1"))
	if err != nil || len(got) != 1 {
		t.Fatalf("alice reads her cells: %v %v", got, err)
	}
	tc := got[0].(mcp.TextResourceContents)
	var cells contract.SessionCells
	if err := json.Unmarshal([]byte(tc.Text), &cells); err != nil || tc.MIMEType != "application/json" || len(cells.Cells) != 2 || cells.Cells[1].Code != "print(x)" {
		t.Fatalf("%s %s: %v", tc.MIMEType, tc.Text, err)
	}
	for _, c := range []struct{ who, uri string }{
		{"mallory", contract.SessionCellsURI("s_1")},
		{"alice", contract.SessionCellsURI("s_2")},
		{"alice", "runbox://sessions/s_1/files"},
	} {
		if _, err := read(c.who, c.uri); !errors.Is(err, server.ErrResourceNotFound) {
			t.Errorf("%s reads %s: %v", c.who, c.uri, err)
		}
	}
}
