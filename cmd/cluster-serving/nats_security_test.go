package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/nats-io/nats.go"

	"github.com/cluster-serving/cluster-serving/embedded"
	"github.com/cluster-serving/cluster-serving/embedded/tlstest"
	"github.com/cluster-serving/cluster-serving/mesh"
	"github.com/cluster-serving/cluster-serving/mesh/serving"
)

// plantedPW is a password the tests plant in configs and URLs; no output
// of any command may show it.
const plantedPW = "pl4nted-pw-9x"

// writeNATSConf writes a nats-server config file beside the test's config.
func writeNATSConf(t *testing.T, text string) string {
	return writeFile(t, filepath.Join(t.TempDir(), "nats.conf"), text, 0o600)
}

// TestAnonymousNatsListen: start's check refuses an embedded server that
// listens beyond loopback with no authentication, naming
// natsServerConfig; an authorization block or natsAllowAnonymous lifts
// it. It binds 0.0.0.0 on a free port and lets it go: no traffic.
func TestAnonymousNatsListen(t *testing.T) {
	users := writeNATSConf(t, `authorization { users = [{user: a, password: "`+plantedPW+`"}] }`)
	port := freePorts(t, 1)[0]
	listen := fmt.Sprintf("0.0.0.0:%d", port)
	for _, tc := range []struct {
		name string
		file serving.File
		want string // "" for no error
	}{
		{"anonymous", serving.File{NatsListen: listen},
			"natsListen " + listen + " is reachable beyond this machine and the embedded NATS server has no authentication: " +
				"set natsServerConfig to a nats-server config with an authorization block (or natsAllowAnonymous: true)"},
		// An empty host is embedded's default, 127.0.0.1: what it binds.
		{"empty host", serving.File{NatsListen: fmt.Sprintf(":%d", port)}, ""},
		{"users", serving.File{NatsListen: listen, NatsServerConfig: users}, ""},
		{"allowed", serving.File{NatsListen: listen, NatsAllowAnonymous: true}, ""},
		{"loopback", serving.File{NatsListen: fmt.Sprintf("127.0.0.1:%d", port)}, ""},
		{"bad file", serving.File{NatsListen: listen, NatsServerConfig: writeNATSConf(t, "authorization {")}, `config key "natsServerConfig"`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			tc.file.HTTPPort = -1
			p := &process{role: "start", file: &tc.file}
			err := p.checkListeners()
			switch {
			case tc.want == "" && err != nil:
				t.Errorf("got %v, want no error", err)
			case tc.want != "" && (err == nil || !strings.Contains(err.Error(), tc.want)):
				t.Errorf("got %v, want an error containing %q", err, tc.want)
			}
		})
	}
}

// TestStartRefusesAnonymousNatsListen runs the real start: it exits with
// the message before any model loads.
func TestStartRefusesAnonymousNatsListen(t *testing.T) {
	skipIfShort(t)
	cfg, _, _, env := testJob(t, "")
	rewriteKey(t, cfg, "natsListen", fmt.Sprintf("0.0.0.0:%d", freePorts(t, 1)[0]))
	p := spawn(t, env, "start", "-c", cfg)
	<-p.done
	if p.cmd.ProcessState.ExitCode() == 0 || !strings.Contains(p.logs(), "set natsServerConfig to a nats-server config with an authorization block") {
		t.Errorf("got exit %d and\n%s\nwant a refusal naming natsServerConfig", p.cmd.ProcessState.ExitCode(), p.logs())
	}
	if strings.Contains(p.logs(), "model loaded") {
		t.Errorf("the model loaded before the check:\n%s", p.logs())
	}
}

// runToEnd spawns a short command and waits until it exits.
func runToEnd(t *testing.T, env []string, args ...string) *proc {
	t.Helper()
	p := spawn(t, env, args...)
	select {
	case <-p.done:
	case <-time.After(60 * time.Second):
		t.Fatalf("%v did not exit", args)
	}
	return p
}

// TestSecuredStart runs start with a natsServerConfig that requires a
// user, at logLevel debug: it serves with no credentials of its own; a
// client without credentials is refused; predict and status with the
// same config and NATS_USER/NATS_PASSWORD answer, as does a worker given
// the password in -nats; the banner's nats req line asks the environment
// for the password. The planted password appears in no output.
func TestSecuredStart(t *testing.T) {
	skipIfShort(t)
	// The file asks for nats-server's debug and trace logs too: they stay off.
	conf := writeNATSConf(t, "debug: true\ntrace: true\nauthorization { users = [{user: a, password: \""+plantedPW+"\"}] }\n")
	cfg, url, job, env := testJob(t, "logLevel: debug\nnatsServerConfig: "+conf+"\n")
	start := spawn(t, env, "start", "-c", cfg)
	nc := waitReady(t, url, start, nats.UserInfo("a", plantedPW))
	waitLog(t, start, "Stop with Ctrl-C")
	if c, err := nats.Connect(url); !errors.Is(err, nats.ErrAuthorization) {
		if c != nil {
			c.Close()
		}
		t.Errorf("a client without credentials: got %v, want nats.ErrAuthorization", err)
	}
	if err := predictAdd(nc, job, [4]float32{1, 2, 3, 4}, 10*time.Second); err != nil {
		t.Fatal(err)
	}
	if want := `nats req -s ` + url + ` --user "$NATS_USER" --password "$NATS_PASSWORD" ` + mesh.PredictSubject(job); !strings.Contains(start.logs(), want) {
		t.Errorf("banner lacks %q:\n%s", want, start.logs())
	}
	outputs := append([]*proc{start}, securedClients(t, env, cfg, job)...)
	withPW := strings.Replace(url, "nats://", "nats://a:"+plantedPW+"@", 1)
	worker := spawn(t, env, "worker", "-c", cfg, "-nats", withPW)
	outputs = append(outputs, worker)
	waitLog(t, worker, "joined nats://a:xxxxx@")
	worker.signalAndWait(t, syscall.SIGTERM)
	start.signalAndWait(t, syscall.SIGTERM)
	for _, p := range outputs {
		if strings.Contains(p.logs(), plantedPW) {
			t.Errorf("%v printed the planted password:\n%s", p.cmd.Args[1:], p.logs())
		}
	}
	if !strings.Contains(start.logs(), "level=DEBUG") {
		t.Errorf("start logged nothing at debug:\n%s", start.logs())
	}
}

// securedClients runs predict and status with NATS_USER and
// NATS_PASSWORD, which must answer, and predict without, which must be
// refused naming NATS_PASSWORD, and returns the three.
func securedClients(t *testing.T, env []string, cfg, job string) []*proc {
	t.Helper()
	creds := append(env[:len(env):len(env)], "NATS_USER=a", "NATS_PASSWORD="+plantedPW)
	predict := runToEnd(t, creds, "predict", "-c", cfg, "-d", `{"instances":[{"x":[1,2,3,4]}]}`)
	status := runToEnd(t, creds, "status", "-c", cfg, "-once")
	for _, p := range []*proc{predict, status} {
		if p.cmd.ProcessState.ExitCode() != 0 {
			t.Errorf("%s with NATS_USER and NATS_PASSWORD: exit %d\n%s", p.cmd.Args[1], p.cmd.ProcessState.ExitCode(), p.logs())
		}
	}
	if !strings.Contains(predict.logs(), `{"predictions":["`) || !strings.Contains(status.logs(), job) {
		t.Errorf("got predict %q and status %q, want an answer and the job", predict.logs(), status.logs())
	}
	refused := runToEnd(t, env, "predict", "-c", cfg, "-d", `{"instances":[{"x":[1,2,3,4]}]}`)
	if refused.cmd.ProcessState.ExitCode() == 0 || !strings.Contains(refused.logs(), "NATS_PASSWORD") {
		t.Errorf("predict without credentials: got exit %d and %q, want a refusal naming NATS_PASSWORD", refused.cmd.ProcessState.ExitCode(), refused.logs())
	}
	return []*proc{predict, status, refused}
}

// TestWorkerAndStatusOverTLS: a worker and status reach an external NATS
// whose tls block verifies clients, through natsUrl tls:// and the
// natsTls* keys; a request through that server is answered.
func TestWorkerAndStatusOverTLS(t *testing.T) {
	skipIfShort(t)
	pki := tlstest.New(t, "nats")
	srv, err := embedded.Start(embedded.Config{Port: embedded.RandomPort, StoreDir: t.TempDir(),
		ConfigFile: writeNATSConf(t, fmt.Sprintf(`tls { cert_file: %q, key_file: %q, ca_file: %q, verify: true }`, pki.ServerCert, pki.ServerKey, pki.CA))})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(srv.Shutdown)
	extra := fmt.Sprintf("natsUrl: %s\nnatsTlsCa: %s\nnatsTlsCert: %s\nnatsTlsKey: %s\n", srv.ClientURL(), pki.CA, pki.ClientCert, pki.ClientKey)
	cfg, _, job, env := testJob(t, extra)
	worker := spawn(t, env, "worker", "-c", cfg)
	waitLog(t, worker, "joined "+srv.ClientURL())
	nc, err := nats.Connect(srv.ClientURL(), nats.RootCAs(pki.CA), nats.ClientCert(pki.ClientCert, pki.ClientKey))
	if err != nil {
		t.Fatal(err)
	}
	defer nc.Close()
	// No NATS door runs (workers have none): submit as the door would.
	client, err := mesh.NewClient(nc, mesh.ClientConfig{})
	if err != nil {
		t.Fatal(err)
	}
	defer client.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	res, err := client.Submit(ctx, job, mesh.Request{Body: []byte(`{"instances":[{"x":[1,2,3,4]}]}`)})
	if err != nil {
		t.Fatalf("submit over TLS: %v", err)
	}
	if got, err := decodePrediction(res.Body); err != nil || len(got) != 4 || got[0] != 3 {
		t.Errorf("got %v, %v; want 2x+1 = [3 5 7 9]", got, err)
	}
	waitProc(t, worker, 30*time.Second, "a worker in status", func() bool {
		st := runToEnd(t, env, "status", "-c", cfg, "-once")
		return st.cmd.ProcessState.ExitCode() == 0 && strings.Contains(st.logs(), job) && !strings.Contains(st.logs(), "no workers answered")
	})
	worker.signalAndWait(t, syscall.SIGTERM)
}

// TestSecuredStartTLS: start's embedded server with a tls block that
// verifies clients and a users list; predict, with the natsTls* keys of
// the same config and NATS_USER/NATS_PASSWORD, gets its answer, and the
// banner's nats req line names the CA and the client certificate.
func TestSecuredStartTLS(t *testing.T) {
	skipIfShort(t)
	pki := tlstest.New(t, "nats")
	conf := writeNATSConf(t, fmt.Sprintf("authorization { users = [{user: a, password: %q}] }\n"+
		"tls { cert_file: %q, key_file: %q, ca_file: %q, verify: true }\n", plantedPW, pki.ServerCert, pki.ServerKey, pki.CA))
	extra := fmt.Sprintf("natsServerConfig: %s\nnatsTlsCa: %s\nnatsTlsCert: %s\nnatsTlsKey: %s\n", conf, pki.CA, pki.ClientCert, pki.ClientKey)
	cfg, url, _, env := testJob(t, extra)
	start := spawn(t, env, "start", "-c", cfg)
	waitLog(t, start, "Stop with Ctrl-C")
	if c, err := nats.Connect(url, nats.RootCAs(pki.CA), nats.UserInfo("a", plantedPW)); err == nil {
		c.Close()
		t.Error("a client without a certificate: got a connection, want a refusal")
	}
	creds := append(env[:len(env):len(env)], "NATS_USER=a", "NATS_PASSWORD="+plantedPW)
	p := runToEnd(t, creds, "predict", "-c", cfg, "-d", `{"instances":[{"x":[1,2,3,4]}]}`)
	if !strings.Contains(p.logs(), `{"predictions":["`) {
		t.Errorf("predict over TLS: got exit %d and %q, want an answer", p.cmd.ProcessState.ExitCode(), p.logs())
	}
	want := fmt.Sprintf("nats req -s %s --tlsca %s --tlscert %s --tlskey %s --user", url, pki.CA, pki.ClientCert, pki.ClientKey)
	if !strings.Contains(start.logs(), want) {
		t.Errorf("banner lacks %q:\n%s", want, start.logs())
	}
	start.signalAndWait(t, syscall.SIGTERM)
	for _, out := range []string{start.logs(), p.logs()} {
		if strings.Contains(out, plantedPW) {
			t.Errorf("printed the planted password:\n%s", out)
		}
	}
}

// TestStartNatsFlagWithServerConfig: -nats would replace the embedded
// server that natsServerConfig secures; start refuses the pair, as the
// config check refuses natsUrl with natsServerConfig.
func TestStartNatsFlagWithServerConfig(t *testing.T) {
	cfg := filepath.Join(t.TempDir(), "config.yaml")
	conf := writeNATSConf(t, `authorization { users = [{user: a, password: pw}] }`)
	writeFile(t, cfg, "modelPath: /m\nnatsServerConfig: "+conf+"\n", 0o600)
	err := run([]string{"start", "-c", cfg, "-nats", "nats://127.0.0.1:1"}, io.Discard, io.Discard)
	if err == nil || !strings.Contains(err.Error(), "natsServerConfig") {
		t.Errorf("got %v, want a refusal naming natsServerConfig", err)
	}
}
