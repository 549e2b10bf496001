package redis_test

import (
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"fmt"
	"math/big"
	"net"
	"os"
	"path/filepath"
	"testing"
	"time"

	goredis "github.com/redis/go-redis/v9"

	"github.com/cluster-serving/cluster-serving/bridge/redis"
	"github.com/cluster-serving/cluster-serving/bridge/redis/redistest"
	"github.com/cluster-serving/cluster-serving/infer/wire"
	"github.com/cluster-serving/cluster-serving/mesh"
	"github.com/cluster-serving/cluster-serving/mesh/meshtest"
)

// writeCerts writes a CA (ca.pem) and a server certificate for 127.0.0.1
// signed by it (server.pem, server.key) into dir.
func writeCerts(tb testing.TB, dir string) {
	tb.Helper()
	caKey, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		tb.Fatal(err)
	}
	caTmpl := &x509.Certificate{SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: "test CA"},
		NotBefore: time.Now().Add(-time.Minute), NotAfter: time.Now().Add(time.Hour),
		IsCA: true, BasicConstraintsValid: true, KeyUsage: x509.KeyUsageCertSign}
	caDER, err := x509.CreateCertificate(rand.Reader, caTmpl, caTmpl, &caKey.PublicKey, caKey)
	if err != nil {
		tb.Fatal(err)
	}
	ca, _ := x509.ParseCertificate(caDER)
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		tb.Fatal(err)
	}
	tmpl := &x509.Certificate{SerialNumber: big.NewInt(2), Subject: pkix.Name{CommonName: "redis"},
		NotBefore: time.Now().Add(-time.Minute), NotAfter: time.Now().Add(time.Hour),
		IPAddresses: []net.IP{net.ParseIP("127.0.0.1")}, ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
		KeyUsage: x509.KeyUsageDigitalSignature}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, ca, &key.PublicKey, caKey)
	if err != nil {
		tb.Fatal(err)
	}
	keyDER, err := x509.MarshalECPrivateKey(key)
	if err != nil {
		tb.Fatal(err)
	}
	for name, b := range map[string]*pem.Block{
		"ca.pem":     {Type: "CERTIFICATE", Bytes: caDER},
		"server.pem": {Type: "CERTIFICATE", Bytes: der},
		"server.key": {Type: "EC PRIVATE KEY", Bytes: keyDER},
	} {
		if err := os.WriteFile(filepath.Join(dir, name), pem.EncodeToMemory(b), 0o600); err != nil {
			tb.Fatal(err)
		}
	}
}

// The door reaches a TLS-only Redis trusting the CA of a PEM file
// (redisSecureEnabled + redisSecureTrustStorePath).
func TestTLSRedis(t *testing.T) {
	dir := t.TempDir()
	writeCerts(t, dir)
	port := redistest.FreePort(t)
	redistest.RunServer(t, "--port", "0", "--tls-port", fmt.Sprint(port),
		"--tls-cert-file", filepath.Join(dir, "server.pem"), "--tls-key-file", filepath.Join(dir, "server.key"),
		"--tls-ca-cert-file", filepath.Join(dir, "ca.pem"), "--tls-auth-clients", "no")
	tc, err := redis.TLSConfig(filepath.Join(dir, "ca.pem"))
	if err != nil {
		t.Fatal(err)
	}
	addr := fmt.Sprintf("127.0.0.1:%d", port)
	rdb := goredis.NewClient(&goredis.Options{Addr: addr, TLSConfig: tc})
	t.Cleanup(func() { _ = rdb.Close() })
	meshtest.WaitFor(t, "TLS redis-server", func() bool { return rdb.Ping(context.Background()).Err() == nil })

	// Without the CA the server's certificate is refused.
	plain := goredis.NewClient(&goredis.Options{Addr: addr, TLSConfig: &tls.Config{MinVersion: tls.VersionTLS12}, MaxRetries: -1})
	t.Cleanup(func() { _ = plain.Close() })
	if err := plain.Ping(context.Background()).Err(); err == nil {
		t.Error("PING over TLS without the CA succeeded; want a certificate error")
	}

	f := newFakeMesh(0)
	d, err := redis.New(redis.Config{Addr: addr, Job: "tls", TLS: tc}, f, nil)
	if err != nil {
		t.Fatal(err)
	}
	meshtest.Run(t, d.Run)
	enqueue(t, rdb, "tls", "over-tls", "QVJST1c=", false)
	meshtest.WaitFor(t, "request over TLS", func() bool { return len(f.requests()) == 1 })
	f.results <- []mesh.Result{{URI: "over-tls", Status: wire.StatusOK, Body: []byte("v")}}
	if err := <-f.written; err != nil {
		t.Fatal(err)
	}
	if got := query(t, rdb, "tls", "over-tls"); got != "v" {
		t.Errorf("got %q, want v", got)
	}
}
