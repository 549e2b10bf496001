package embedded_test

import (
	"context"
	"errors"
	"fmt"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"os"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/cluster-serving/cluster-serving/embedded"
	"github.com/cluster-serving/cluster-serving/embedded/tlstest"
)

func startConf(t testing.TB, conf string) *embedded.Server {
	t.Helper()
	s, err := embedded.Start(embedded.Config{Port: embedded.RandomPort, StoreDir: t.TempDir(), ConfigFile: tlstest.NATSConf(t, conf)})
	if err != nil {
		t.Fatalf("Start: %v", err)
	}
	t.Cleanup(s.Shutdown)
	return s
}

// connectAs connects to url with opts, who naming the client in a
// failure; the connection closes at cleanup.
func connectAs(t testing.TB, who, url string, opts ...nats.Option) *nats.Conn {
	t.Helper()
	nc, err := nats.Connect(url, opts...)
	if err != nil {
		t.Fatalf("%s: %v", who, err)
	}
	t.Cleanup(nc.Close)
	return nc
}

// useJetStream creates a stream and publishes to it on nc.
func useJetStream(t testing.TB, nc *nats.Conn, name string) {
	t.Helper()
	js, err := jetstream.New(nc)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if _, err := js.CreateOrUpdateStream(ctx, jetstream.StreamConfig{Name: name, Subjects: []string{name + ".>"}}); err != nil {
		t.Fatalf("CreateStream: %v", err)
	}
	if _, err := js.Publish(ctx, name+".x", []byte("hi")); err != nil {
		t.Fatalf("Publish: %v", err)
	}
}

// TestConfigFileUsers: a server from a config with an authorization
// block refuses a client without credentials and serves one with them,
// JetStream included; the process's own in-process connection needs none.
func TestConfigFileUsers(t *testing.T) {
	s := startConf(t, `authorization { users = [{user: a, password: s3cret}] }`)
	if !s.AuthRequired() || !s.InProcessAuth() || !s.PasswordAuth() {
		t.Errorf("got AuthRequired %v, InProcessAuth %v, PasswordAuth %v; want all", s.AuthRequired(), s.InProcessAuth(), s.PasswordAuth())
	}
	if nc, err := nats.Connect(s.ClientURL()); !errors.Is(err, nats.ErrAuthorization) {
		if nc != nil {
			nc.Close()
		}
		t.Fatalf("no credentials: got %v, want nats.ErrAuthorization", err)
	}
	if _, err := nats.Connect(s.ClientURL(), nats.UserInfo("a", "wrong")); !errors.Is(err, nats.ErrAuthorization) {
		t.Fatalf("wrong password: got %v, want nats.ErrAuthorization", err)
	}
	useJetStream(t, connectAs(t, "with credentials", s.ClientURL(), nats.UserInfo("a", "s3cret")), "USERS")
	useJetStream(t, connectAs(t, "in process", "", s.ConnectOption()), "SELF")
}

// TestInProcessIdentity covers each kind of authorization block: the
// in-process connection gets in, into the account the users share (a
// request from user a reaches its subscription), and the network without
// credentials does not.
func TestInProcessIdentity(t *testing.T) {
	for _, tc := range []struct {
		name, conf string
		user       nats.Option
	}{
		{"users", `authorization { users = [{user: a, password: pw}] }`, nats.UserInfo("a", "pw")},
		{"single user", `authorization { user: a, password: pw }`, nats.UserInfo("a", "pw")},
		{"token", `authorization { token: t0ken }`, nats.Token("t0ken")},
		{"account", `accounts { SVC { jetstream: enabled, users = [{user: a, password: pw}] } }`, nats.UserInfo("a", "pw")},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s := startConf(t, tc.conf)
			self := connectAs(t, "in process", s.ClientURL(), s.ConnectOption())
			sub, err := self.Subscribe("echo", func(m *nats.Msg) { _ = m.Respond(m.Data) })
			if err != nil {
				t.Fatal(err)
			}
			defer sub.Unsubscribe()
			_ = self.Flush()
			useJetStream(t, self, "S")
			if _, err := nats.Connect(s.ClientURL()); !errors.Is(err, nats.ErrAuthorization) {
				t.Errorf("no credentials: got %v, want nats.ErrAuthorization", err)
			}
			nc, err := nats.Connect(s.ClientURL(), tc.user)
			if err != nil {
				t.Fatalf("as the file's user: %v", err)
			}
			defer nc.Close()
			if m, err := nc.Request("echo", []byte("hi"), 2*time.Second); err != nil || string(m.Data) != "hi" {
				t.Errorf("request to the in-process subscriber: got %v, want its echo", err)
			}
		})
	}
}

// TestInProcessIdentityNone: users in two accounts leave start no account
// to pick; the server still starts, says its in-process connection
// needs the caller's credentials, and takes them in process.
func TestInProcessIdentityNone(t *testing.T) {
	s := startConf(t, `accounts { A { users = [{user: a, password: pw}] }, B { users = [{user: b, password: pw}] } }`)
	if !s.AuthRequired() || s.InProcessAuth() {
		t.Errorf("got AuthRequired %v, InProcessAuth %v; want true, false", s.AuthRequired(), s.InProcessAuth())
	}
	nc, err := nats.Connect("", s.ConnectOption(), nats.UserInfo("b", "pw"))
	if err != nil {
		t.Fatalf("in process as user b: %v", err)
	}
	nc.Close()
}

// TestConfigFileTLSVerify: a tls block with verify: true refuses a client
// without a certificate and accepts one with a certificate of its CA.
func TestConfigFileTLSVerify(t *testing.T) {
	pki := tlstest.New(t, "nats")
	s := startConf(t, fmt.Sprintf(`tls { cert_file: %q, key_file: %q, ca_file: %q, verify: true }`, pki.ServerCert, pki.ServerKey, pki.CA))
	if !strings.HasPrefix(s.ClientURL(), "tls://") || !s.AuthRequired() || s.PasswordAuth() {
		t.Errorf("got URL %s, AuthRequired %v, PasswordAuth %v; want tls://, true, false", s.ClientURL(), s.AuthRequired(), s.PasswordAuth())
	}
	if nc, err := nats.Connect(s.ClientURL(), nats.RootCAs(pki.CA)); err == nil {
		nc.Close()
		t.Fatal("no client certificate: got a connection, want a refusal")
	}
	useJetStream(t, connectAs(t, "with a client certificate", s.ClientURL(), nats.RootCAs(pki.CA), nats.ClientCert(pki.ClientCert, pki.ClientKey)), "TLS")
	connectAs(t, "in process", "", s.ConnectOption())
}

// TestConfigFilePrecedence: Host and Port win over the file's listen;
// the file's max_payload and store_dir win over the Config's.
func TestConfigFilePrecedence(t *testing.T) {
	store := t.TempDir()
	conf := tlstest.NATSConf(t, fmt.Sprintf("listen: 127.0.0.1:1\nmax_payload: 1048576\njetstream { store_dir: %q }\n", store))
	s, err := embedded.Start(embedded.Config{Port: embedded.RandomPort, StoreDir: t.TempDir(), MaxPayload: 4 << 20, ConfigFile: conf})
	if err != nil {
		t.Fatalf("Start: %v", err)
	}
	t.Cleanup(s.Shutdown)
	if strings.HasSuffix(s.ClientURL(), ":1") {
		t.Errorf("got URL %s, want the Config's random port", s.ClientURL())
	}
	nc := connectAs(t, "without credentials", s.ClientURL())
	if got, want := nc.MaxPayload(), int64(1<<20); got != want {
		t.Errorf("got max payload %d, want the file's %d", got, want)
	}
	useJetStream(t, nc, "P")
	if got := s.StoreDir(); got != store {
		t.Errorf("got StoreDir %s, want the file's %s", got, store)
	}
	if _, err := os.Stat(filepath.Join(store, "jetstream")); err != nil {
		t.Errorf("the file's store_dir is unused: %v", err)
	}
}

// TestAnonymousListen: beyond loopback, the server needs authentication
// or AllowAnonymous. Check decides without binding; one real Start binds
// 0.0.0.0 on a random port (no traffic goes beyond loopback).
func TestAnonymousListen(t *testing.T) {
	auth := tlstest.NATSConf(t, `authorization { users = [{user: a, password: pw}] }`)
	for _, tc := range []struct {
		name string
		cfg  embedded.Config
		ok   bool
	}{
		{"default loopback", embedded.Config{}, true},
		{"localhost", embedded.Config{Host: "localhost"}, true},
		{"127.0.0.2", embedded.Config{Host: "127.0.0.2"}, true},
		{"::1", embedded.Config{Host: "::1"}, true},
		{"0.0.0.0", embedded.Config{Host: "0.0.0.0"}, false},
		{"::", embedded.Config{Host: "::"}, false},
		{"10.1.2.3", embedded.Config{Host: "10.1.2.3"}, false},
		{"0.0.0.0 with users", embedded.Config{Host: "0.0.0.0", ConfigFile: auth}, true},
		{"0.0.0.0 anonymous allowed", embedded.Config{Host: "0.0.0.0", AllowAnonymous: true}, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			err := embedded.Check(tc.cfg)
			if got := err == nil; got != tc.ok {
				t.Fatalf("got %v, want ok=%v", err, tc.ok)
			}
			var ae *embedded.AnonymousError
			if err != nil && (!errors.As(err, &ae) || !errors.Is(err, embedded.ErrAnonymous) || !strings.Contains(err.Error(), "authorization block")) {
				t.Errorf("got %v, want an *AnonymousError", err)
			}
		})
	}
	if _, err := embedded.Start(embedded.Config{Host: "0.0.0.0", Port: embedded.RandomPort}); !errors.Is(err, embedded.ErrAnonymous) {
		t.Errorf("Start 0.0.0.0 anonymous: got %v, want ErrAnonymous", err)
	}
	s, err := embedded.Start(embedded.Config{Host: "0.0.0.0", Port: embedded.RandomPort, StoreDir: t.TempDir(), ConfigFile: auth})
	if err != nil {
		t.Fatalf("Start 0.0.0.0 with users: %v", err)
	}
	s.Shutdown()
}

func TestConfigFileInvalid(t *testing.T) {
	err := embedded.Check(embedded.Config{ConfigFile: tlstest.NATSConf(t, "authorization { users = ")})
	if !errors.Is(err, embedded.ErrInvalidConfig) || !strings.Contains(err.Error(), "nats.conf") {
		t.Errorf("got %v, want ErrInvalidConfig naming the file", err)
	}
}
