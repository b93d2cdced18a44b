package doctor

import (
	"net"
	"strings"
	"testing"

	"github.com/runbox-mcp/runbox/manifest"
)

// The previews line: absent when they are off; ok on loopback, after a
// test listener answered; a warning on any other address, and when
// sessions are off; a failure when no port of the manifest's is free.
func TestPreviewCheck(t *testing.T) {
	m := manifest.Default()
	if _, ok := previewCheck(m); ok {
		t.Fatal("a line for previews that are off")
	}
	m.Sessions.Enabled = true
	m.Sessions.Expose = manifest.DefaultExpose()
	m.Sessions.Expose.Enabled = true
	c, _ := previewCheck(m)
	if c.Status != OK || !strings.Contains(c.Detail, "loopback only") || !strings.Contains(c.Detail, "127.0.0.1:") || !strings.Contains(c.Detail, "Docker Desktop") {
		t.Fatalf("loopback: %+v", c)
	}

	m.Sessions.Expose.Listen = "0.0.0.0"
	c, _ = previewCheck(m)
	if c.Status != Warn || !strings.Contains(c.Detail, "reachable from the network") || !strings.Contains(c.Fix, "sessions.expose.host") {
		t.Fatalf("0.0.0.0: %+v", c)
	}
	m.Sessions.Expose.Host = "preview.team.example"
	c, _ = previewCheck(m)
	if c.Status != Warn || !strings.Contains(c.Detail, "http://preview.team.example:<port>/") || !strings.Contains(c.Fix, "listen: 127.0.0.1") {
		t.Fatalf("0.0.0.0 with a host: %+v", c)
	}

	// The manifest's only port is taken.
	busy, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer busy.Close()
	m.Sessions.Expose.Listen, m.Sessions.Expose.Host = "127.0.0.1", ""
	m.Sessions.Expose.Ports = []int{busy.Addr().(*net.TCPAddr).Port}
	c, _ = previewCheck(m)
	if c.Status != Fail || !strings.Contains(c.Detail, "sessions.expose.ports") || c.Fix == "" {
		t.Fatalf("no free port: %+v", c)
	}

	m.Sessions.Expose.Ports = nil
	// An address of no interface here (TEST-NET-1).
	m.Sessions.Expose.Listen = "192.0.2.1"
	if c, _ := previewCheck(m); c.Status != Fail || !strings.Contains(c.Detail, "cannot listen on 192.0.2.1") {
		t.Fatalf("an address not on this machine: %+v", c)
	}
	m.Sessions.Expose.Listen = "127.0.0.1"
	m.Sessions.Enabled = false
	if c, _ := previewCheck(m); c.Status != Warn || !strings.Contains(c.Fix, "sessions.enabled: true") {
		t.Fatalf("sessions off: %+v", c)
	}
}
