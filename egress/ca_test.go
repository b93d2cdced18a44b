package egress

import (
	"crypto/x509"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

func roots(ca *CA) *x509.CertPool {
	p := x509.NewCertPool()
	p.AddCert(ca.Certificate())
	return p
}

// The CA issues for its hosts only: its name constraints refuse any other
// name or address to a verifier, even one that trusts it; it is kept and
// reused while its hosts stay the same, its key 0600.
func TestCA(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "ca")
	hosts := []string{"*.corp.example", "127.0.0.1", "api.github.com"}
	ca, err := OpenCA(dir, hosts)
	if err != nil {
		t.Fatal(err)
	}
	c := ca.Certificate()
	if !c.IsCA || !c.MaxPathLenZero || !c.PermittedDNSDomainsCritical || c.NotAfter.Sub(time.Now()) > caValidity {
		t.Fatalf("CA %+v", c)
	}
	if st, err := os.Stat(filepath.Join(dir, caKeyFile)); err != nil || st.Mode().Perm() != 0o600 {
		t.Fatalf("key file: %v %v", st.Mode(), err)
	}
	verify := func(host, name string) error {
		leaf, err := ca.Leaf(host)
		if err != nil {
			t.Fatal(err)
		}
		_, err = leaf.Leaf.Verify(x509.VerifyOptions{DNSName: name, Roots: roots(ca)})
		return err
	}
	for _, h := range []string{"api.github.com", "x.corp.example", "127.0.0.1"} {
		if err := verify(h, h); err != nil {
			t.Errorf("%s: %v", h, err)
		}
	}
	for _, h := range []string{"github.com", "evil.example", "10.0.0.1", "corp.example.evil"} {
		if err := verify(h, h); err == nil || !strings.Contains(err.Error(), "constraint") {
			t.Errorf("%s verified (%v): the CA's constraints must refuse it", h, err)
		}
	}

	// An address's leaf has no common name, which OpenSSL would check
	// against the DNS constraints (and refuse).
	if l, _ := ca.Leaf("127.0.0.1"); l.Leaf.Subject.CommonName != "" || len(l.Leaf.DNSNames) != 0 {
		t.Errorf("leaf for an address: CN %q, names %v", l.Leaf.Subject.CommonName, l.Leaf.DNSNames)
	}

	again, err := OpenCA(dir, hosts)
	if err != nil || !again.Certificate().Equal(c) {
		t.Fatalf("the kept CA was not reused: %v", err)
	}
	other, err := OpenCA(dir, []string{"api.github.com"})
	if err != nil || other.Certificate().Equal(c) {
		t.Fatalf("other hosts, same CA: %v", err)
	}
	if err := func() error {
		l, _ := other.Leaf("x.corp.example")
		_, err := l.Leaf.Verify(x509.VerifyOptions{Roots: roots(other)})
		return err
	}(); err == nil {
		t.Fatal("a host dropped from the manifest still verifies")
	}
	// An IP-only CA admits no name at all.
	ipOnly, err := OpenCA(t.TempDir(), []string{"127.0.0.1"})
	if err != nil {
		t.Fatal(err)
	}
	if l, _ := ipOnly.Leaf("example.com"); l != nil {
		if _, err := l.Leaf.Verify(x509.VerifyOptions{DNSName: "example.com", Roots: roots(ipOnly)}); err == nil {
			t.Fatal("an address-only CA vouched for a name")
		}
	}
}

// Leaves are cached per host until an hour before their end.
func TestCALeafCache(t *testing.T) {
	ca, err := OpenCA(t.TempDir(), []string{"a.example", "b.example"})
	if err != nil {
		t.Fatal(err)
	}
	now := time.Now()
	ca.now = func() time.Time { return now }
	a1, _ := ca.Leaf("a.example")
	a2, _ := ca.Leaf("A.example.")
	b, _ := ca.Leaf("b.example")
	if a1 != a2 || a1 == b || a1.Leaf.DNSNames[0] != "a.example" {
		t.Fatal("cache: same host, another certificate, or the same for another host")
	}
	now = now.Add(leafValidity - leafRenew + time.Minute)
	if a3, _ := ca.Leaf("a.example"); a3 == a1 || !a3.Leaf.NotAfter.After(a1.Leaf.NotAfter) {
		t.Fatal("a leaf near its end was not renewed")
	}
	for i := range maxLeaves + 10 {
		ca.Leaf(fmt.Sprintf("h%d.a.example", i))
	}
	if len(ca.leaves) > maxLeaves {
		t.Fatalf("%d leaves cached", len(ca.leaves))
	}
}
