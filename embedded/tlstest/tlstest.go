// Package tlstest makes a throwaway certificate authority and the server
// and client certificates the security tests need, written as PEM files
// into a test's temporary directory, and the nats-server configuration
// files those tests start servers with. Nothing it makes is committed:
// each test run has its own keys.
package tlstest

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"math/big"
	"net"
	"os"
	"path/filepath"
	"testing"
	"time"

	pkcs12 "software.sslmate.com/src/go-pkcs12"
)

// PKI is one CA with a server and a client certificate it signed, as PEM
// files. Server certificates name localhost, 127.0.0.1 and ::1.
type PKI struct {
	Dir string
	// CA is the CA certificate (PEM); CAKey its private key.
	CA, CAKey string
	// ServerCert and ServerKey are the server's certificate and key.
	ServerCert, ServerKey string
	// ClientCert and ClientKey are a client's certificate and key
	// (extended key usage client auth, common name "client").
	ClientCert, ClientKey string

	ca    *x509.Certificate
	caKey *ecdsa.PrivateKey
}

// NATSConf writes text as a nats-server configuration file (mode 0600: it
// may hold passwords) into a new temporary directory of tb and returns its
// path.
func NATSConf(tb testing.TB, text string) string {
	tb.Helper()
	path := filepath.Join(tb.TempDir(), "nats.conf")
	if err := os.WriteFile(path, []byte(text), 0o600); err != nil {
		tb.Fatal(err)
	}
	return path
}

// New makes a CA named name and its two certificates under a new
// temporary directory of tb.
func New(tb testing.TB, name string) *PKI {
	tb.Helper()
	p := &PKI{Dir: filepath.Join(tb.TempDir(), name)}
	if err := os.MkdirAll(p.Dir, 0o700); err != nil {
		tb.Fatal(err)
	}
	key := newKey(tb)
	tmpl := &x509.Certificate{
		SerialNumber:          big.NewInt(1),
		Subject:               pkix.Name{CommonName: name + " test CA"},
		NotBefore:             time.Now().Add(-time.Hour),
		NotAfter:              time.Now().Add(24 * time.Hour),
		IsCA:                  true,
		BasicConstraintsValid: true,
		KeyUsage:              x509.KeyUsageCertSign | x509.KeyUsageDigitalSignature,
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		tb.Fatal(err)
	}
	p.ca, _ = x509.ParseCertificate(der)
	p.caKey = key
	p.CA = p.write(tb, "ca.pem", "CERTIFICATE", der)
	p.CAKey = p.writeKey(tb, "ca-key.pem", key)
	p.ServerCert, p.ServerKey = p.Issue(tb, "server", x509.ExtKeyUsageServerAuth)
	p.ClientCert, p.ClientKey = p.Issue(tb, "client", x509.ExtKeyUsageClientAuth)
	return p
}

// Issue signs a new certificate named cn for usage, with the SANs
// localhost, 127.0.0.1 and ::1, and returns its certificate and key files.
func (p *PKI) Issue(tb testing.TB, cn string, usage x509.ExtKeyUsage) (cert, key string) {
	tb.Helper()
	k := newKey(tb)
	serial, _ := rand.Int(rand.Reader, big.NewInt(1<<62))
	tmpl := &x509.Certificate{
		SerialNumber: serial,
		Subject:      pkix.Name{CommonName: cn},
		NotBefore:    time.Now().Add(-time.Hour),
		NotAfter:     time.Now().Add(24 * time.Hour),
		KeyUsage:     x509.KeyUsageDigitalSignature | x509.KeyUsageKeyEncipherment,
		ExtKeyUsage:  []x509.ExtKeyUsage{usage},
		DNSNames:     []string{"localhost"},
		IPAddresses:  []net.IP{net.ParseIP("127.0.0.1"), net.IPv6loopback},
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, p.ca, &k.PublicKey, p.caKey)
	if err != nil {
		tb.Fatal(err)
	}
	return p.write(tb, cn+".pem", "CERTIFICATE", der), p.writeKey(tb, cn+"-key.pem", k)
}

// CACert is the CA's certificate.
func (p *PKI) CACert() *x509.Certificate { return p.ca }

// TrustStore writes the CA as a PKCS#12 trust store made by enc (Java's
// trusted certificate entries, as keytool -storetype PKCS12 writes them),
// opened with password, under name in p.Dir, and returns its path.
func (p *PKI) TrustStore(tb testing.TB, enc *pkcs12.Encoder, name, password string) string {
	tb.Helper()
	der, err := enc.WithRand(rand.Reader).EncodeTrustStore([]*x509.Certificate{p.ca}, password)
	if err != nil {
		tb.Fatal(err)
	}
	path := filepath.Join(p.Dir, name)
	if err := os.WriteFile(path, der, 0o600); err != nil {
		tb.Fatal(err)
	}
	return path
}

// Pool is a cert pool holding the CA.
func (p *PKI) Pool() *x509.CertPool {
	pool := x509.NewCertPool()
	pool.AddCert(p.ca)
	return pool
}

// ClientTLS is a client config trusting the CA; with cert, it presents the
// client certificate too.
func (p *PKI) ClientTLS(tb testing.TB, cert bool) *tls.Config {
	tb.Helper()
	c := &tls.Config{RootCAs: p.Pool(), MinVersion: tls.VersionTLS12}
	if cert {
		kp, err := tls.LoadX509KeyPair(p.ClientCert, p.ClientKey)
		if err != nil {
			tb.Fatal(err)
		}
		c.Certificates = []tls.Certificate{kp}
	}
	return c
}

func newKey(tb testing.TB) *ecdsa.PrivateKey {
	k, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		tb.Fatal(err)
	}
	return k
}

func (p *PKI) writeKey(tb testing.TB, name string, k *ecdsa.PrivateKey) string {
	der, err := x509.MarshalPKCS8PrivateKey(k)
	if err != nil {
		tb.Fatal(err)
	}
	return p.write(tb, name, "PRIVATE KEY", der)
}

func (p *PKI) write(tb testing.TB, name, typ string, der []byte) string {
	path := filepath.Join(p.Dir, name)
	if err := os.WriteFile(path, pem.EncodeToMemory(&pem.Block{Type: typ, Bytes: der}), 0o600); err != nil {
		tb.Fatal(err)
	}
	return path
}
