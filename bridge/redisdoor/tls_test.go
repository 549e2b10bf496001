package redisdoor_test

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"log/slog"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/cluster-serving/cluster-serving/infer/status"

	goredis "github.com/redis/go-redis/v9"
	pkcs12 "software.sslmate.com/src/go-pkcs12"

	"github.com/cluster-serving/cluster-serving/bridge/redisdoor"
	"github.com/cluster-serving/cluster-serving/bridge/redisdoor/redistest"
	"github.com/cluster-serving/cluster-serving/embedded/tlstest"
	"github.com/cluster-serving/cluster-serving/mesh"
	"github.com/cluster-serving/cluster-serving/mesh/meshtest"
)

// storePassword opens the PKCS#12 trust stores the tests write.
const storePassword = "st0re-pw"

// keytoolTrustStore has a JDK's keytool write p's CA as a PKCS#12 trust
// store, the way the original's users made theirs; "" when no JDK is
// installed.
func keytoolTrustStore(tb testing.TB, p *tlstest.PKI) string {
	tb.Helper()
	keytool, err := exec.LookPath("keytool")
	if err != nil {
		return ""
	}
	path := filepath.Join(p.Dir, "keytool.p12")
	out, err := exec.Command(keytool, "-importcert", "-noprompt", "-storetype", "PKCS12", "-keystore", path,
		"-storepass", storePassword, "-alias", "ca", "-file", p.CA).CombinedOutput()
	if err != nil {
		tb.Fatalf("keytool: %v\n%s", err, out)
	}
	return path
}

// storeCase is a trust store file, the password it is opened with, and
// the error wanted: nil when the CA is trusted, errAny for some error.
type storeCase struct {
	name, path, password string
	want                 error
}

// LoadTrustStore reads PEM, DER and PKCS#12 trust stores by their
// content, and a wrong password fails with ErrTrustStorePassword without
// printing it.
func TestLoadTrustStore(t *testing.T) {
	p := tlstest.New(t, "store")
	der := filepath.Join(p.Dir, "ca.der")
	notCert := filepath.Join(p.Dir, "hello.txt")
	for path, data := range map[string][]byte{der: p.CACert().Raw, notCert: []byte("hello")} {
		if err := os.WriteFile(path, data, 0o600); err != nil {
			t.Fatal(err)
		}
	}
	modern := p.TrustStore(t, pkcs12.Modern2023, "modern.p12", storePassword)
	legacy := p.TrustStore(t, pkcs12.LegacyDES, "legacy.p12", storePassword)
	open := p.TrustStore(t, pkcs12.Passwordless, "open.p12", "")
	tests := []storeCase{
		{"PEM", p.CA, "", nil},
		{"PEM, password ignored", p.CA, "unused", nil},
		{"DER certificate", der, "", nil},
		{"PKCS#12 AES", modern, storePassword, nil},
		{"PKCS#12 legacy 3DES", legacy, storePassword, nil},
		{"PKCS#12 without password", open, "", nil},
		{"PKCS#12 wrong password", modern, "wr0ng-store-pw", redisdoor.ErrTrustStorePassword},
		{"PKCS#12 no password given", legacy, "", redisdoor.ErrTrustStorePassword},
		{"neither PEM nor DER", notCert, "", errAny},
		{"key file", p.ClientKey, "", errAny},
		{"missing", filepath.Join(p.Dir, "missing.pem"), "", errAny},
	}
	if kt := keytoolTrustStore(t, p); kt != "" {
		tests = append(tests,
			storeCase{"keytool PKCS12", kt, storePassword, nil},
			storeCase{"keytool wrong password", kt, "wr0ng-store-pw", redisdoor.ErrTrustStorePassword})
	} else {
		t.Log("keytool not installed: the keytool-made trust store is not tried")
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			pool, err := redisdoor.LoadTrustStore(tt.path, tt.password)
			checkErr(t, err, tt.want)
			if tt.password != "" && err != nil && strings.Contains(err.Error(), tt.password) {
				t.Errorf("error %q holds the password", err)
			}
			if tt.want == nil && err == nil {
				if _, err := p.CACert().Verify(x509.VerifyOptions{Roots: pool}); err != nil {
					t.Errorf("the CA is not trusted: %v", err)
				}
			}
		})
	}
}

// errAny stands for any error in a table.
var errAny = errors.New("any error")

// checkErr reports err unless it is what want says: nil, any error
// (errAny), or one wrapping want.
func checkErr(tb testing.TB, err, want error) {
	tb.Helper()
	switch {
	case want == nil && err != nil:
		tb.Errorf("got %v, want no error", err)
	case want != nil && err == nil:
		tb.Errorf("got no error, want %v", want)
	case want != nil && want != errAny && !errors.Is(err, want):
		tb.Errorf("got %v, want an error wrapping %v", err, want)
	}
}

func TestTLSConfig(t *testing.T) {
	p := tlstest.New(t, "config")
	tests := []struct {
		name, cert, key string
		certs           int
		want            error
	}{
		{"roots only", "", "", 0, nil},
		{"client certificate", p.ClientCert, p.ClientKey, 1, nil},
		{"certificate without key", p.ClientCert, "", 0, redisdoor.ErrInvalidConfig},
		{"key without certificate", "", p.ClientKey, 0, redisdoor.ErrInvalidConfig},
		{"key of another certificate", p.ClientCert, p.ServerKey, 0, errAny},
		{"missing file", filepath.Join(p.Dir, "none.pem"), p.ClientKey, 0, errAny},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c, err := redisdoor.TLSConfig(p.Pool(), tt.cert, tt.key)
			checkErr(t, err, tt.want)
			if err == nil && (len(c.Certificates) != tt.certs || c.RootCAs == nil || c.MinVersion != tls.VersionTLS12) {
				t.Errorf("got %d certificates, roots %v, min version %x; want %d, the pool, TLS 1.2",
					len(c.Certificates), c.RootCAs != nil, c.MinVersion, tt.certs)
			}
		})
	}
}

// doorTLS is the door's TLS as cmd builds it from config.yaml: p's CA as
// a PKCS#12 trust store, and the client certificate when cert is true.
func doorTLS(tb testing.TB, p *tlstest.PKI, cert bool) *tls.Config {
	tb.Helper()
	roots, err := redisdoor.LoadTrustStore(p.TrustStore(tb, pkcs12.Modern2023, "door.p12", storePassword), storePassword)
	if err != nil {
		tb.Fatal(err)
	}
	certFile, keyFile := "", ""
	if cert {
		certFile, keyFile = p.ClientCert, p.ClientKey
	}
	tc, err := redisdoor.TLSConfig(roots, certFile, keyFile)
	if err != nil {
		tb.Fatal(err)
	}
	return tc
}

// serveOne runs a door with cfg and checks that a record rdb writes to
// the job's stream is handed to the mesh and its result written back; it
// returns what the door logged at debug level, go-redis's lines included.
func serveOne(tb testing.TB, cfg redisdoor.Config, rdb *goredis.Client) (logged []string) {
	tb.Helper()
	f := newFakeMesh(0)
	logs := &logBuffer{}
	redisdoor.ResetGoredisLog()
	d, err := redisdoor.New(cfg, f, debugLogger(logs))
	if err != nil {
		tb.Fatal(err)
	}
	stop := meshtest.Run(tb, d.Run)
	defer stop()
	enqueue(tb, rdb, cfg.Job, "rec", "QVJST1c=", false)
	meshtest.WaitFor(tb, "the record at the mesh", func() bool { return len(f.requests()) == 1 })
	f.results <- []mesh.Result{{URI: "rec", Status: status.OK, Body: []byte("v")}}
	if err := <-f.written; err != nil {
		tb.Fatal(err)
	}
	if got := query(tb, rdb, cfg.Job, "rec"); got != "v" {
		tb.Errorf("got %q, want v", got)
	}
	stop()
	return logs.lines()
}

func debugLogger(logs *logBuffer) *slog.Logger {
	return slog.New(slog.NewTextHandler(logs, &slog.HandlerOptions{Level: slog.LevelDebug}))
}

// refused runs a door with cfg that Redis refuses and returns the first
// line it logs about it (at debug level, go-redis's own lines included),
// and every line it logged.
func refused(tb testing.TB, cfg redisdoor.Config, what string) (line string, all []string) {
	tb.Helper()
	logs := &logBuffer{}
	redisdoor.ResetGoredisLog()
	d, err := redisdoor.New(cfg, newFakeMesh(0), debugLogger(logs))
	if err != nil {
		tb.Fatal(err)
	}
	stop := meshtest.Run(tb, d.Run)
	meshtest.WaitFor(tb, what, func() bool { return logs.count("create group; retrying") > 0 })
	stop()
	for _, l := range logs.lines() {
		if line == "" && strings.Contains(l, "create group; retrying") {
			line = l
		}
	}
	return line, logs.lines()
}

// A door with the CA (a PKCS#12 trust store) and a client certificate
// serves a Redis that requires client certificates, by host:port with
// redisSecureEnabled and by rediss://; without the certificate Redis
// refuses it and the door says why.
func TestMutualTLSRedis(t *testing.T) {
	p := tlstest.New(t, "mtls")
	addr, rdb := redistest.StartTLS(t, redistest.TLS{Cert: p.ServerCert, Key: p.ServerKey, CA: p.CA, AuthClients: true},
		&goredis.Options{TLSConfig: p.ClientTLS(t, true)})
	port := addr[strings.LastIndexByte(addr, ':')+1:]

	t.Run("host:port", func(t *testing.T) {
		serveOne(t, redisdoor.Config{Addr: addr, Job: "mtls", TLS: doorTLS(t, p, true)}, rdb)
	})
	t.Run("rediss", func(t *testing.T) {
		// The server name comes from the URL: the certificate names localhost.
		serveOne(t, redisdoor.Config{Addr: "rediss://localhost:" + port, Job: "mtls2", TLS: doorTLS(t, p, true)}, rdb)
	})
	t.Run("without client certificate", func(t *testing.T) {
		line, _ := refused(t, redisdoor.Config{Addr: addr, Job: "nocert", TLS: doorTLS(t, p, false),
			RetryInterval: 10 * time.Millisecond}, "the refusal logged")
		if !strings.Contains(line, "certificate") {
			t.Errorf("got %q, want an error about the missing client certificate", line)
		}
		t.Log(line)
	})
	t.Run("without the CA", func(t *testing.T) {
		tc, err := redisdoor.TLSConfig(nil, p.ClientCert, p.ClientKey)
		if err != nil {
			t.Fatal(err)
		}
		line, _ := refused(t, redisdoor.Config{Addr: addr, Job: "noca", TLS: tc, RetryInterval: 10 * time.Millisecond}, "the refusal logged")
		if !strings.Contains(line, "certificate signed by unknown authority") {
			t.Errorf("got %q, want an error about the unknown CA", line)
		}
	})
}

// planted is the password the secret tests hide in redisUrl; every line
// and error is searched for it.
const planted = "pl4nted-redis-pw"

// An ACL user (redis://user:password@) works; with a wrong password the
// door says WRONGPASS and prints no password.
func TestRedisACLUser(t *testing.T) {
	addr, rdb := redistest.Start(t)
	ctx := context.Background()
	if err := rdb.Do(ctx, "ACL", "SETUSER", "door", "on", ">"+planted, "~*", "&*", "+@all").Err(); err != nil {
		t.Fatal(err)
	}
	// Only the ACL user is left: the door must log in as it.
	as := goredis.NewClient(&goredis.Options{Addr: addr, Username: "door", Password: planted})
	t.Cleanup(func() { _ = as.Close() })
	if err := rdb.Do(ctx, "ACL", "SETUSER", "default", "off").Err(); err != nil {
		t.Fatal(err)
	}
	all := serveOne(t, redisdoor.Config{Addr: "redis://door:" + planted + "@" + addr, Job: "acl"}, as)

	line, refusedLog := refused(t, redisdoor.Config{Addr: "redis://door:wr0ng-" + planted + "@" + addr, Job: "acl",
		RetryInterval: 10 * time.Millisecond}, "WRONGPASS logged")
	if !strings.Contains(line, "WRONGPASS") {
		t.Errorf("got %q, want WRONGPASS", line)
	}
	noSecret(t, planted, append(all, refusedLog...)...)
}
