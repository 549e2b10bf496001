package serving_test

import (
	"context"
	"errors"
	"fmt"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"os"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nkeys"

	"github.com/cluster-serving/cluster-serving/embedded"
	"github.com/cluster-serving/cluster-serving/embedded/tlstest"
	"github.com/cluster-serving/cluster-serving/mesh/serving"
)

const plantedPW = "pl4nted-pw-9x"

// TestNodeOnSecuredEmbeddedServer: a node whose embedded server has an
// authorization block serves with no credentials of its own (the
// server's in-process identity), and a client with the file's user gets
// answers; one without credentials is refused.
func TestNodeOnSecuredEmbeddedServer(t *testing.T) {
	cfg := addConfig(t, "secured", "")
	cfg.Embedded.ConfigFile = tlstest.NATSConf(t, `authorization { users = [{user: a, password: "`+plantedPW+`"}] }`)
	cfg.Serve, cfg.Service = true, true
	n := runReady(t, cfg)
	if !n.AuthRequired() {
		t.Error("AuthRequired: got false, want true")
	}
	if _, err := nats.Connect(n.URL()); !errors.Is(err, nats.ErrAuthorization) {
		t.Fatalf("no credentials: got %v, want nats.ErrAuthorization", err)
	}
	requestAdd(t, n.URL(), "secured", serving.NATSAuth{User: "a", Password: plantedPW}.Options()...)
}

// TestNodeNeedsCredentials: users in two accounts leave the embedded
// server no identity to grant the node; without Auth, NewNode fails
// naming the keys, and with the user of one account it serves.
func TestNodeNeedsCredentials(t *testing.T) {
	conf := tlstest.NATSConf(t, `accounts { A { jetstream: enabled, users = [{user: a, password: pw}] }, B { users = [{user: b, password: pw}] } }`)
	cfg := addConfig(t, "twoacc", "")
	cfg.Embedded.ConfigFile = conf
	_, err := serving.NewNode(context.Background(), cfg)
	if !errors.Is(err, serving.ErrNATSAuth) || !strings.Contains(err.Error(), "natsCredentials") || !strings.Contains(err.Error(), "NATS_PASSWORD") {
		t.Fatalf("got %v, want ErrNATSAuth naming natsCredentials and NATS_PASSWORD", err)
	}
	cfg.Auth = serving.NATSAuth{User: "a", Password: "pw"}
	runReady(t, cfg)
}

// TestNodeExternalAuth joins an external server that requires a user:
// with the password in the URL, or in Auth, it serves; without, NewNode
// fails with ErrNATSAuth and an error that shows the URL redacted.
func TestNodeExternalAuth(t *testing.T) {
	srv, err := embedded.Start(embedded.Config{Port: embedded.RandomPort, StoreDir: t.TempDir(),
		ConfigFile: tlstest.NATSConf(t, `authorization { users = [{user: a, password: "`+plantedPW+`"}] }`)})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(srv.Shutdown)
	withPW := strings.Replace(srv.ClientURL(), "nats://", "nats://a:"+plantedPW+"@", 1)
	for _, tc := range []struct {
		name, url string
		auth      serving.NATSAuth
		ok        bool
	}{
		{"url", withPW, serving.NATSAuth{}, true},
		{"auth", srv.ClientURL(), serving.NATSAuth{User: "a", Password: plantedPW}, true},
		{"none", srv.ClientURL(), serving.NATSAuth{}, false},
		{"wrong", strings.Replace(withPW, plantedPW, "nope", 1), serving.NATSAuth{}, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			cfg := addConfig(t, "ext"+tc.name, tc.url)
			cfg.Auth = tc.auth
			ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
			defer cancel()
			n, err := serving.NewNode(ctx, cfg)
			if tc.ok {
				if err != nil {
					t.Fatalf("NewNode: %v", err)
				}
				_ = n.Close()
				return
			}
			if err == nil {
				_ = n.Close()
				t.Fatal("NewNode: got no error, want a refusal")
			}
			if !errors.Is(err, serving.ErrNATSAuth) || strings.Contains(err.Error(), plantedPW) || strings.Contains(err.Error(), ":nope@") {
				t.Errorf("got %v, want ErrNATSAuth without the password", err)
			}
		})
	}
}

// TestNATSAuthTLS: the natsTls* keys reach a server whose tls block
// verifies clients.
func TestNATSAuthTLS(t *testing.T) {
	pki := tlstest.New(t, "nats")
	srv, err := embedded.Start(embedded.Config{Port: embedded.RandomPort, StoreDir: t.TempDir(),
		ConfigFile: tlstest.NATSConf(t, fmt.Sprintf(`tls { cert_file: %q, key_file: %q, ca_file: %q, verify: true }`, pki.ServerCert, pki.ServerKey, pki.CA))})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(srv.Shutdown)
	file := &serving.File{NatsTLSCA: pki.CA, NatsTLSCert: pki.ClientCert, NatsTLSKey: pki.ClientKey}
	nc, err := nats.Connect(srv.ClientURL(), file.NATSAuth(nil).Options()...)
	if err != nil {
		t.Fatalf("with natsTls*: %v", err)
	}
	nc.Close()
	file.NatsTLSCert, file.NatsTLSKey = "", ""
	if nc, err := nats.Connect(srv.ClientURL(), file.NATSAuth(nil).Options()...); err == nil {
		nc.Close()
		t.Error("without a client certificate: got a connection, want a refusal")
	}
}

func TestFileNATSAuth(t *testing.T) {
	f := &serving.File{NatsCredentials: "/c.creds", NatsTLSCA: "/ca.pem", NatsTLSCert: "/c.pem", NatsTLSKey: "/k.pem",
		NatsServerConfig: "/nats.conf", NatsAllowAnonymous: true, NatsInboxPrefix: "_INBOX_svc"}
	env := map[string]string{"NATS_USER": "u", "NATS_PASSWORD": "p", "NATS_TOKEN": "t"}
	got := f.NATSAuth(func(k string) string { return env[k] })
	want := serving.NATSAuth{Credentials: "/c.creds", User: "u", Password: "p", Token: "t", TLSCA: "/ca.pem", TLSCert: "/c.pem", TLSKey: "/k.pem", InboxPrefix: "_INBOX_svc"}
	if got != want {
		t.Errorf("got %+v, want %+v", got, want)
	}
	if e := f.Embedded(); e.ConfigFile != "/nats.conf" || !e.AllowAnonymous {
		t.Errorf("Embedded: got %+v, want ConfigFile and AllowAnonymous", e)
	}
	if c := f.Node(func(k string) string { return env[k] }); c.Auth != want {
		t.Errorf("Node: got Auth %+v, want %+v", c.Auth, want)
	}
}

// TestConnectErrorScrubs: nats.go quotes a URL it cannot parse whole;
// ConnectError's text must not show its password or token, and errors.Is
// still finds what nats.go returned.
func TestConnectErrorScrubs(t *testing.T) {
	for _, url := range []string{
		"nats://a:" + plantedPW + "@h:x",
		"nats://a:" + plantedPW + "@[::1",
		"nats://" + plantedPW + "@h:x",
		"nats://127.0.0.1:1,nats://a:" + plantedPW + "@h:x",
		"nats://a:pl4nted%40pw@h:x",
	} {
		_, nerr := nats.Connect(url, nats.Timeout(time.Second))
		if nerr == nil {
			t.Fatalf("%s: connected", url)
		}
		err := serving.ConnectError(url, nerr)
		if msg := err.Error(); strings.Contains(msg, plantedPW) || strings.Contains(msg, "pl4nted%40pw") || !strings.Contains(msg, "xxxxx") {
			t.Errorf("got %q, want the secret shown as xxxxx", msg)
		}
		if !errors.Is(err, nerr) {
			t.Errorf("errors.Is(%v, %v): got false", err, nerr)
		}
	}
}

// TestNodeAccountWithoutJetStream: nats-server enables JetStream per
// account once the file has accounts; NewNode says what to add.
func TestNodeAccountWithoutJetStream(t *testing.T) {
	cfg := addConfig(t, "nojs", "")
	cfg.Embedded.ConfigFile = tlstest.NATSConf(t, `accounts { A { users = [{user: a, password: pw}] } }`)
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	n, err := serving.NewNode(ctx, cfg)
	if err == nil {
		_ = n.Close()
		t.Fatal("NewNode: got no error")
	}
	if !strings.Contains(err.Error(), "jetstream: enabled") {
		t.Errorf("got %v, want it to say `jetstream: enabled`", err)
	}
}

// TestNATSAuthNkeySeed: natsCredentials may be a bare nkey seed file, for
// an nkey user of a nats-server config; a wrong seed is refused; the
// server's in-process identity works beside nkey users.
func TestNATSAuthNkeySeed(t *testing.T) {
	user, err := nkeys.CreateUser()
	if err != nil {
		t.Fatal(err)
	}
	pub, _ := user.PublicKey()
	seed, _ := user.Seed()
	other, _ := nkeys.CreateUser()
	otherSeed, _ := other.Seed()
	srv, err := embedded.Start(embedded.Config{Port: embedded.RandomPort, StoreDir: t.TempDir(),
		ConfigFile: tlstest.NATSConf(t, `authorization { users = [{nkey: `+pub+`}] }`)})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(srv.Shutdown)
	self, err := nats.Connect("", srv.ConnectOption()) // the in-process identity beside nkey users
	if err != nil {
		t.Fatalf("in process: %v", err)
	}
	self.Close()
	for _, tc := range []struct {
		name string
		seed []byte
		ok   bool
	}{{"seed", seed, true}, {"other seed", otherSeed, false}} {
		t.Run(tc.name, func(t *testing.T) {
			path := filepath.Join(t.TempDir(), "user.nk")
			if err := os.WriteFile(path, append(tc.seed, '\n'), 0o600); err != nil {
				t.Fatal(err)
			}
			nc, err := nats.Connect(srv.ClientURL(), serving.NATSAuth{Credentials: path}.Options()...)
			if got := err == nil; got != tc.ok {
				t.Errorf("got %v, want ok=%v", err, tc.ok)
			}
			if nc != nil {
				nc.Close()
			}
		})
	}
}

// TestNodeInboxPrefix: the node's in-process connection to its embedded
// server takes its inboxes under Auth.InboxPrefix, so its client's
// results and its worker's pulled work arrive there; a user allowed to
// subscribe _INBOX.> reads none of it, only the canary sent to it last.
func TestNodeInboxPrefix(t *testing.T) {
	cfg := addConfig(t, "inbox", "")
	cfg.Embedded.ConfigFile = tlstest.NATSConf(t, `authorization { users = [{user: a, password: pw},
		{user: snoop, password: pw, permissions: {publish: "serving.*.predict", subscribe: "_INBOX.>"}}] }`)
	cfg.Serve, cfg.Auth.InboxPrefix = true, "_INBOX_t.node"
	n := runReady(t, cfg)
	if got := n.Conn().NewInbox(); !strings.HasPrefix(got, "_INBOX_t.node.") {
		t.Errorf("NewInbox: got %s, want it under _INBOX_t.node", got)
	}
	count := func(user, subject string) *atomic.Int64 {
		nc, err := nats.Connect(n.URL(), nats.UserInfo(user, "pw"))
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(nc.Close)
		var c atomic.Int64
		if _, err := nc.Subscribe(subject, func(*nats.Msg) { c.Add(1) }); err != nil {
			t.Fatal(err)
		}
		if err := nc.Flush(); err != nil {
			t.Fatal(err)
		}
		return &c
	}
	own, snooped := count("a", "_INBOX_t.node.>"), count("snoop", "_INBOX.>")
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	for range 5 {
		if err := submitAdd(ctx, n.Client(), "inbox"); err != nil {
			t.Fatal(err)
		}
	}
	if err := n.Conn().Publish("_INBOX.canary", nil); err != nil {
		t.Fatal(err)
	}
	waitFor(t, "the canary", func() bool { return snooped.Load() > 0 })
	if got := snooped.Load(); got != 1 {
		t.Errorf("under _INBOX.: got %d messages, want the canary alone", got)
	}
	// Each request: its PubAck, its pulled work and its result, at least.
	waitFor(t, "10 messages under _INBOX_t.node", func() bool { return own.Load() >= 10 })
}
