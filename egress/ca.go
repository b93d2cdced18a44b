package egress

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"errors"
	"fmt"
	"math/big"
	"net"
	"net/netip"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/runbox-mcp/runbox/internal/statefile"
	"github.com/runbox-mcp/runbox/manifest"
)

// CA is runbox's own certificate authority: the proxy ends a box's TLS to
// an entry with a credential with a certificate it issues, and the boxes
// of a manifest with such entries trust it. Its key stays in the state
// directory (0600) and this process; a box only ever gets the
// certificate. Name constraints limit it to the hosts of the entries with
// credentials, and it signs server certificates only (no intermediate).
type CA struct {
	cert *x509.Certificate
	key  *ecdsa.PrivateKey
	pem  []byte

	// leafKey signs every leaf: one key, made at start, never written.
	leafKey *ecdsa.PrivateKey
	now     func() time.Time

	mu     sync.Mutex
	leaves map[string]*tls.Certificate
}

// CA files in its directory.
const (
	caCertFile = "ca.pem"
	caKeyFile  = "ca-key.pem"
)

// How long things live: the CA a year (renewed a month before its end),
// a leaf a day (renewed an hour before).
const (
	caValidity   = 365 * 24 * time.Hour
	caRenew      = 30 * 24 * time.Hour
	leafValidity = 24 * time.Hour
	leafRenew    = time.Hour
	// maxLeaves bounds the cache; a full cache starts over.
	maxLeaves = 1024
)

// CAHosts are the hosts the CA may issue for: those of entries with a
// credential.
func CAHosts(n manifest.Network) []string {
	var hosts []string
	for _, e := range n.Allow {
		if e.Credential != nil && !slices.Contains(hosts, e.Host) {
			hosts = append(hosts, e.Host)
		}
	}
	slices.Sort(hosts)
	return hosts
}

// OpenCA loads the CA kept in dir, or makes one (and keeps it there) when
// there is none, it is near its end, or its name constraints are not
// exactly hosts.
func OpenCA(dir string, hosts []string) (*CA, error) {
	leafKey, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return nil, err
	}
	ca := &CA{leafKey: leafKey, now: time.Now, leaves: map[string]*tls.Certificate{}}
	if cert, key, pemBytes, err := loadCA(dir); err == nil && time.Until(cert.NotAfter) > caRenew && sameConstraints(cert, hosts) {
		ca.cert, ca.key, ca.pem = cert, key, pemBytes
		return ca, nil
	}
	if ca.cert, ca.key, ca.pem, err = newCA(hosts, time.Now()); err != nil {
		return nil, err
	}
	if err := saveCA(dir, ca.pem, ca.key); err != nil {
		return nil, err
	}
	return ca, nil
}

// PEM is the CA's certificate, what a box trusts.
func (ca *CA) PEM() []byte { return ca.pem }

// Certificate is the CA's certificate.
func (ca *CA) Certificate() *x509.Certificate { return ca.cert }

// maxCAFile bounds the read of the CA's certificate or key.
const maxCAFile = 64 << 10

func loadCA(dir string) (*x509.Certificate, *ecdsa.PrivateKey, []byte, error) {
	certPEM, err := statefile.Read(filepath.Join(dir, caCertFile), maxCAFile)
	if err != nil {
		return nil, nil, nil, err
	}
	keyPEM, err := statefile.Read(filepath.Join(dir, caKeyFile), maxCAFile)
	if err != nil {
		return nil, nil, nil, err
	}
	cb, _ := pem.Decode(certPEM)
	kb, _ := pem.Decode(keyPEM)
	if cb == nil || kb == nil {
		return nil, nil, nil, errors.New("not PEM")
	}
	cert, err := x509.ParseCertificate(cb.Bytes)
	if err != nil {
		return nil, nil, nil, err
	}
	key, err := x509.ParseECPrivateKey(kb.Bytes)
	if err != nil {
		return nil, nil, nil, err
	}
	if pub, ok := cert.PublicKey.(*ecdsa.PublicKey); !ok || !pub.Equal(&key.PublicKey) {
		return nil, nil, nil, errors.New("the key is not the certificate's")
	}
	return cert, key, certPEM, nil
}

func saveCA(dir string, certPEM []byte, key *ecdsa.PrivateKey) error {
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return fmt.Errorf("runbox CA: %w", err)
	}
	der, err := x509.MarshalECPrivateKey(key)
	if err != nil {
		return err
	}
	// The key first: a certificate on disk always has its key.
	if err := writeAtomic(filepath.Join(dir, caKeyFile), pem.EncodeToMemory(&pem.Block{Type: "EC PRIVATE KEY", Bytes: der}), 0o600); err != nil {
		return fmt.Errorf("runbox CA: %w", err)
	}
	if err := writeAtomic(filepath.Join(dir, caCertFile), certPEM, 0o644); err != nil {
		return fmt.Errorf("runbox CA: %w", err)
	}
	return nil
}

func writeAtomic(path string, b []byte, mode os.FileMode) error {
	f, err := os.CreateTemp(filepath.Dir(path), ".tmp-*")
	if err != nil {
		return err
	}
	defer os.Remove(f.Name())
	if err := f.Chmod(mode); err != nil {
		f.Close()
		return err
	}
	if _, err := f.Write(b); err != nil {
		f.Close()
		return err
	}
	if err := f.Close(); err != nil {
		return err
	}
	return os.Rename(f.Name(), path)
}

// constraints are the name constraints for hosts: names (a wildcard's
// domain, which covers its subdomains) and addresses. An empty kind gets
// a name nothing uses, since a kind without constraints is unconstrained.
func constraints(hosts []string) (dns []string, ips []*net.IPNet) {
	for _, h := range hosts {
		if a, err := netip.ParseAddr(h); err == nil {
			a = a.Unmap()
			ips = append(ips, &net.IPNet{IP: a.AsSlice(), Mask: net.CIDRMask(a.BitLen(), a.BitLen())})
			continue
		}
		dns = append(dns, strings.TrimPrefix(h, "*."))
	}
	if len(dns) == 0 {
		dns = []string{"invalid"}
	}
	if len(ips) == 0 {
		ips = []*net.IPNet{{IP: net.IPv4(0, 0, 0, 0).To4(), Mask: net.CIDRMask(32, 32)}}
	}
	return dns, ips
}

func sameConstraints(cert *x509.Certificate, hosts []string) bool {
	dns, ips := constraints(hosts)
	if !slices.Equal(cert.PermittedDNSDomains, dns) || len(cert.PermittedIPRanges) != len(ips) {
		return false
	}
	for i, r := range ips {
		if r.String() != cert.PermittedIPRanges[i].String() {
			return false
		}
	}
	return true
}

func serial() *big.Int {
	n, _ := rand.Int(rand.Reader, new(big.Int).Lsh(big.NewInt(1), 127))
	return n
}

func newCA(hosts []string, now time.Time) (*x509.Certificate, *ecdsa.PrivateKey, []byte, error) {
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return nil, nil, nil, err
	}
	dns, ips := constraints(hosts)
	host, _ := os.Hostname()
	tmpl := &x509.Certificate{
		SerialNumber:                serial(),
		Subject:                     pkix.Name{CommonName: "runbox egress CA (" + host + ")", Organization: []string{"runbox"}},
		NotBefore:                   now.Add(-time.Hour),
		NotAfter:                    now.Add(caValidity),
		KeyUsage:                    x509.KeyUsageCertSign | x509.KeyUsageCRLSign,
		ExtKeyUsage:                 []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
		BasicConstraintsValid:       true,
		IsCA:                        true,
		MaxPathLenZero:              true,
		PermittedDNSDomainsCritical: true,
		PermittedDNSDomains:         dns,
		PermittedIPRanges:           ips,
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		return nil, nil, nil, err
	}
	cert, err := x509.ParseCertificate(der)
	if err != nil {
		return nil, nil, nil, err
	}
	return cert, key, pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}), nil
}

// Leaf returns a server certificate for host (a name or an address), from
// the cache while it has more than leafRenew to live.
func (ca *CA) Leaf(host string) (*tls.Certificate, error) {
	host = NormalizeHost(host)
	now := ca.now()
	ca.mu.Lock()
	defer ca.mu.Unlock()
	if c, ok := ca.leaves[host]; ok && c.Leaf.NotAfter.Sub(now) > leafRenew {
		return c, nil
	}
	tmpl := &x509.Certificate{
		SerialNumber: serial(),
		NotBefore:    now.Add(-time.Hour),
		NotAfter:     now.Add(leafValidity),
		KeyUsage:     x509.KeyUsageDigitalSignature,
		ExtKeyUsage:  []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
	}
	if a, err := netip.ParseAddr(host); err == nil {
		// No common name: OpenSSL checks a name-like common name (an
		// address is one) against the CA's name constraints when the
		// certificate has no DNS name, and would refuse it.
		tmpl.IPAddresses = []net.IP{a.Unmap().AsSlice()}
	} else {
		tmpl.Subject.CommonName = host
		tmpl.DNSNames = []string{host}
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, ca.cert, &ca.leafKey.PublicKey, ca.key)
	if err != nil {
		return nil, err
	}
	leaf, err := x509.ParseCertificate(der)
	if err != nil {
		return nil, err
	}
	c := &tls.Certificate{Certificate: [][]byte{der, ca.cert.Raw}, PrivateKey: ca.leafKey, Leaf: leaf}
	if len(ca.leaves) >= maxLeaves {
		clear(ca.leaves)
	}
	ca.leaves[host] = c
	return c, nil
}
