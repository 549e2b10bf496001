package main

// The security of a job: the embedded NATS server's authentication and
// TLS, the privacy of its clients' inboxes, the HTTP door's TLS and bearer
// tokens, and no secret in any output.

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"reflect"
	"regexp"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	goredis "github.com/redis/go-redis/v9"
	pkcs12 "software.sslmate.com/src/go-pkcs12"

	"github.com/cluster-serving/cluster-serving/bridge/redisdoor"
	"github.com/cluster-serving/cluster-serving/bridge/redisdoor/redistest"
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

// plantedToken is the bearer token of the security tests: it must show in
// no output of the process, debug logs included.
const plantedToken = "planted-http-token-5e1f0a"

// secureJob writes a config whose HTTP door serves HTTPS with client
// certificates and bearer tokens, at debug level.
func secureJob(t *testing.T) (cfg, url string, env []string, pki *tlstest.PKI) {
	t.Helper()
	pki = tlstest.New(t, "door")
	tokens := filepath.Join(t.TempDir(), "tokens")
	writeFile(t, tokens, "# ops team\n\n"+plantedToken+"\n", 0o600)
	cfg, url, _, env = testJob(t, fmt.Sprintf("httpTlsCert: %s\nhttpTlsKey: %s\nhttpTlsClientCa: %s\nhttpAuthTokenFile: %s\nlogLevel: debug\n",
		pki.ServerCert, pki.ServerKey, pki.CA, tokens))
	return cfg, url, env, pki
}

// TestStartHTTPSecurity runs `start` with HTTPS, client certificates and
// tokens: the banner's curl line runs as printed (with the real curl,
// TOKEN and the client's files in its environment), plain HTTP, a client
// without a certificate and a request without a token are refused, and
// the token shows nowhere in the output.
func TestStartHTTPSecurity(t *testing.T) {
	skipIfShort(t)
	if _, err := exec.LookPath("curl"); err != nil {
		t.Skip("curl not installed: the banner's curl line is run with the real curl")
	}
	cfg, url, env, pki := secureJob(t)
	start := spawn(t, env, "start", "-c", cfg)
	waitReady(t, url, start)
	waitLog(t, start, "Stop with Ctrl-C")
	m := regexp.MustCompile(`curl -s https://(127\.0\.0\.1:\d+)/predict --cacert `).FindStringSubmatch(start.logs())
	if m == nil {
		t.Fatalf("no https curl line with --cacert in\n%s", start.logs())
	}
	runBannerCurls(t, start.logs(), "TOKEN="+plantedToken, "CLIENT_CERT="+pki.ClientCert, "CLIENT_KEY="+pki.ClientKey)
	checkDoorRefuses(t, m[1], pki)
	start.signalAndWait(t, syscall.SIGTERM)
	if strings.Contains(start.logs(), plantedToken) {
		t.Errorf("the output holds the token:\n%s", start.logs())
	}
}

// runBannerCurls runs each curl line of logs through sh with env added:
// each must answer a prediction.
func runBannerCurls(t *testing.T, logs string, env ...string) {
	t.Helper()
	var n int
	for _, line := range strings.Split(logs, "\n") {
		line = strings.TrimSpace(line)
		if !strings.HasPrefix(line, "curl ") {
			continue
		}
		n++
		if !strings.Contains(line, `-H "Authorization: Bearer $TOKEN"`) || !strings.Contains(line, `--cert "$CLIENT_CERT" --key "$CLIENT_KEY"`) {
			t.Errorf("curl line %q: want the client certificate and the token as variables", line)
		}
		cmd := exec.Command("sh", "-c", line)
		cmd.Env = append(os.Environ(), env...)
		out, err := cmd.CombinedOutput()
		if err != nil || !strings.HasPrefix(string(out), `{"predictions":["`) {
			t.Errorf("%s: got %v, %s; want a prediction", line, err, out)
		}
	}
	if n != 1 {
		t.Errorf("ran %d curl lines, want 1", n)
	}
}

// checkDoorRefuses checks the door at addr: plain HTTP, no client
// certificate and no token are refused; the health probes need no token.
func checkDoorRefuses(t *testing.T, addr string, pki *tlstest.PKI) {
	t.Helper()
	get := func(scheme string, tc *tls.Config, path, token string) (int, error) {
		c := &http.Client{Timeout: 10 * time.Second, Transport: &http.Transport{TLSClientConfig: tc}}
		req, _ := http.NewRequest("GET", scheme+"://"+addr+path, nil)
		if token != "" {
			req.Header.Set("Authorization", "Bearer "+token)
		}
		resp, err := c.Do(req)
		if err != nil {
			return 0, err
		}
		defer resp.Body.Close()
		_, _ = io.Copy(io.Discard, resp.Body)
		return resp.StatusCode, nil
	}
	withCert := pki.ClientTLS(t, true)
	for _, tc := range []struct {
		name, scheme, path, token string
		tls                       *tls.Config
		want                      int // 0: no answer
	}{
		{"plain http", "http", "/models", plantedToken, nil, http.StatusBadRequest},
		{"no client certificate", "https", "/models", plantedToken, pki.ClientTLS(t, false), 0},
		{"no token", "https", "/models", "", withCert, http.StatusUnauthorized},
		{"wrong token", "https", "/models", "nope", withCert, http.StatusUnauthorized},
		{"token", "https", "/models", plantedToken, withCert, http.StatusOK},
		{"ready without token", "https", "/v2/health/ready", "", withCert, http.StatusOK},
	} {
		st, err := get(tc.scheme, tc.tls, tc.path, tc.token)
		if st != tc.want {
			t.Errorf("%s: got %d %v, want %d", tc.name, st, err, tc.want)
		}
	}
}

// TestHTTPFileErrorsNameTheKey starts with a TLS or token file the door
// cannot use: the command fails, naming the config key.
func TestHTTPFileErrorsNameTheKey(t *testing.T) {
	skipIfShort(t)
	pki := tlstest.New(t, "bad")
	empty := filepath.Join(t.TempDir(), "empty")
	writeFile(t, empty, "# no token yet\n", 0o600)
	for _, tc := range []struct{ key, extra string }{
		{"httpTlsCert", fmt.Sprintf("httpTlsCert: /nonexistent/cert.pem\nhttpTlsKey: %s\n", pki.ServerKey)},
		{"httpTlsClientCa", fmt.Sprintf("httpTlsCert: %s\nhttpTlsKey: %s\nhttpTlsClientCa: %s\n", pki.ServerCert, pki.ServerKey, empty)},
		{"httpAuthTokenFile", fmt.Sprintf("httpAuthTokenFile: %s\n", empty)},
	} {
		t.Run(tc.key, func(t *testing.T) {
			cfg, _, _, env := testJob(t, tc.extra)
			p := spawn(t, env, "start", "-c", cfg)
			select {
			case <-p.done:
			case <-time.After(60 * time.Second):
				t.Fatal("start did not fail")
			}
			if want := fmt.Sprintf("config key %q", tc.key); p.cmd.ProcessState.ExitCode() == 0 || !strings.Contains(p.logs(), want) {
				t.Errorf("got exit %d and\n%s\nwant a failure naming %s", p.cmd.ProcessState.ExitCode(), p.logs(), want)

			}
		})
	}
}

// plantedStorePW is the PKCS#12 trust store's password in the secrets test.
const plantedStorePW = "pl4nted-store-pw-77"

// secretsJob is every secret the service knows, planted at once: the
// embedded NATS server's user password (natsServerConfig), the HTTP door's
// bearer token (with HTTPS and client certificates), the Redis password
// and the trust store's password (mutual TLS), and the secret and salt of
// an encrypted model, all at logLevel debug with metrics on. It returns
// the start config, a second one for the bridge (the Redis door), the
// NATS URL, the job, the env of client commands, and the secrets.
type secretsJob struct {
	cfg, bridgeCfg, url, job, metrics string
	redisPort                         string
	env                               []string
	pki                               *tlstest.PKI
	rdb                               *goredis.Client
	secrets                           []string
}

func newSecretsJob(t *testing.T) *secretsJob {
	t.Helper()
	j := &secretsJob{pki: tlstest.New(t, "secrets")}
	j.cfg, j.url, j.job, j.env = encryptedJob(t)
	dir := filepath.Dir(j.cfg)
	tokens := filepath.Join(dir, "tokens")
	writeFile(t, tokens, plantedToken+"\n", 0o600)
	conf := writeNATSConf(t, "debug: true\nauthorization { users = [{user: a, password: \""+plantedPW+"\"}] }\n")
	j.metrics = fmt.Sprintf("127.0.0.1:%d", freePorts(t, 1)[0])
	rewriteKey(t, j.cfg, "metricsListen", j.metrics)
	j.cfg = bridgeYAML(t, j.cfg, "natsServerConfig: "+conf, "httpTlsCert: "+j.pki.ServerCert, "httpTlsKey: "+j.pki.ServerKey,
		"httpTlsClientCa: "+j.pki.CA, "httpAuthTokenFile: "+tokens)

	addr, rdb := redistest.StartTLS(t, redistest.TLS{Cert: j.pki.ServerCert, Key: j.pki.ServerKey, CA: j.pki.CA, AuthClients: true},
		&goredis.Options{TLSConfig: j.pki.ClientTLS(t, true), Password: redisTestPassword}, "--requirepass", redisTestPassword)
	j.rdb = rdb
	j.redisPort = addr[strings.LastIndex(addr, ":")+1:]
	// The bridge reaches NATS through natsUrl with the password in it.
	withPW := strings.Replace(j.url, "nats://", "nats://a:"+plantedPW+"@", 1)
	j.bridgeCfg = bridgeYAML(t, j.cfg, "natsUrl: "+withPW, "redisUrl: rediss://:"+redisTestPassword+"@localhost:"+j.redisPort,
		"redisSecureEnabled: true", "redisSecureTrustStorePath: "+j.pki.TrustStore(t, pkcs12.Modern2023, "truststore.p12", plantedStorePW),
		"redisSecureTrustStorePassword: "+plantedStorePW, "redisTlsCert: "+j.pki.ClientCert, "redisTlsKey: "+j.pki.ClientKey)
	rewriteKey(t, j.bridgeCfg, "metricsListen", "off")
	rewriteKey(t, j.bridgeCfg, "natsServerConfig", `""`) // natsUrl: no embedded server
	j.env = append(j.env, serving.EnvSecretFile+"="+filepath.Join(dir, "secret"), serving.EnvSaltFile+"="+filepath.Join(dir, "salt"))
	j.secrets = []string{plantedPW, plantedToken, redisTestPassword, plantedStorePW, plantedSecret, plantedSalt}
	return j
}

// TestNoSecretInAnyOutput runs every command of a deployment whose every
// secret is planted (see secretsJob), at debug level, through good and
// bad paths: start, predict, status, worker and http with the password
// in -nats, bridge with it in natsUrl and redisUrl, a request over HTTPS
// with and without the token, a record over mutual-TLS Redis, the status
// document while the bridge serves (status -once, status -json, the
// status page), predict against a dead server with the password in its
// URL, stop and shutdown. No secret may show in any output, nor in the
// Prometheus metrics, and no URL of the status document its user info.
func TestNoSecretInAnyOutput(t *testing.T) {
	skipIfShort(t)
	j := newSecretsJob(t)
	start := spawn(t, j.env, "start", "-c", j.cfg)
	waitReady(t, j.url, start, nats.UserInfo("a", plantedPW))
	waitLog(t, start, "Stop with Ctrl-C")
	outputs := []*proc{start}
	creds := append(j.env[:len(j.env):len(j.env)], "NATS_USER=a", "NATS_PASSWORD="+plantedPW)
	body := `{"instances":[{"x":[1,2,3,4]}]}`
	withPW := strings.Replace(j.url, "nats://", "nats://a:"+plantedPW+"@", 1)
	deadPW := fmt.Sprintf("nats://a:%s@127.0.0.1:%d", plantedPW, freePorts(t, 1)[0])
	for _, args := range [][]string{
		{"predict", "-c", j.cfg, "-d", body},
		{"predict", "-c", j.cfg, "-fill", "1"},
		{"status", "-c", j.cfg, "-once"},
		{"predict", "-c", j.cfg, "-nats", deadPW, "-d", body},
		{"version"},
	} {
		outputs = append(outputs, runToEnd(t, creds, args...))
	}
	j.callHTTPS(t)
	outputs = append(outputs, j.runDoors(t, withPW)...)
	j.scrapeMetrics(t, start)
	outputs = append(outputs, runToEnd(t, j.env, "stop", "-c", j.cfg))
	select {
	case <-start.done:
	case <-time.After(60 * time.Second):
		t.Fatal("start did not stop")
	}
	for _, p := range outputs {
		for _, s := range j.secrets {
			if strings.Contains(p.logs(), s) {
				t.Errorf("%v printed the planted secret %q:\n%s", p.cmd.Args[1:], s, p.logs())
			}
		}
	}
	if !strings.Contains(start.logs(), "level=DEBUG") {
		t.Errorf("start logged nothing at debug:\n%s", start.logs())
	}
}

// callHTTPS sends one request with the token (200) and one without (401)
// through the door's HTTPS with a client certificate; the answers are
// checked for the token too; start's log, checked later, records them.
func (j *secretsJob) callHTTPS(t *testing.T) {
	t.Helper()
	port := j.httpPort(t)
	client := &http.Client{Timeout: 30 * time.Second, Transport: &http.Transport{TLSClientConfig: j.pki.ClientTLS(t, true)}}
	for _, tc := range []struct {
		token string
		want  int
	}{{plantedToken, http.StatusOK}, {"", http.StatusUnauthorized}, {"wr0ng", http.StatusUnauthorized}} {
		req, _ := http.NewRequest(http.MethodPost, "https://127.0.0.1:"+port+"/predict", strings.NewReader(`{"instances":[{"x":[1,2,3,4]}]}`))
		if tc.token != "" {
			req.Header.Set("Authorization", "Bearer "+tc.token)
		}
		resp, err := client.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		got, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if resp.StatusCode != tc.want || strings.Contains(string(got), plantedToken) {
			t.Errorf("token %q: got %d %s, want %d without the token in it", tc.token, resp.StatusCode, got, tc.want)
		}
	}
}

// runDoors runs a worker, the Redis door (bridge) and the HTTP door
// (http) as separate processes, the worker and the HTTP door with the
// password in -nats, the bridge with it in natsUrl; answers one record
// over mutual-TLS Redis; reads the status document while they serve
// (checkStatus); and stops them.
func (j *secretsJob) runDoors(t *testing.T, withPW string) []*proc {
	t.Helper()
	worker := spawn(t, j.env, "worker", "-c", j.cfg, "-nats", withPW)
	waitLog(t, worker, "joined nats://a:xxxxx@")
	bridge := spawn(t, j.env, "bridge", "-c", j.bridgeCfg)
	waitLog(t, bridge, "serving redis stream")
	ctx := context.Background()
	if err := j.rdb.XAdd(ctx, &goredis.XAddArgs{Stream: j.job, Values: []any{"uri", "s", "data", `{"instances":[{"x":[1,2,3,4]}]}`, "serde", "stream"}}).Err(); err != nil {
		t.Fatal(err)
	}
	pollUntil(t, 60*time.Second, "the record's result", func() bool {
		got, _ := j.rdb.HGet(ctx, redisdoor.ResultKey(j.job, "s"), "value").Result()
		return got != "" && got != redisdoor.NaN
	})
	httpCfg := rewriteKey(t, bridgeYAML(t, j.cfg), "httpPort", fmt.Sprint(freePorts(t, 1)[0]))
	rewriteKey(t, httpCfg, "metricsListen", "off")
	door := spawn(t, j.env, "http", "-c", httpCfg, "-nats", withPW)
	waitLog(t, door, "HTTP door on https://")
	status := j.checkStatus(t)
	for _, p := range []*proc{worker, bridge, door} {
		p.signalAndWait(t, syscall.SIGTERM)
	}
	return append([]*proc{worker, bridge, door}, status...)
}

// checkStatus reads the status document while the bridge serves the
// Redis door, whose redisUrl holds the password: status -once and
// -json -once with the bridge's config (natsUrl holds the password too)
// and start's status page, GET /ui/status. Each must name the door by
// its URL without user info, show no user info at all and no secret. It
// returns the status commands, whose output the caller checks again.
func (j *secretsJob) checkStatus(t *testing.T) []*proc {
	t.Helper()
	host := "localhost:" + j.redisPort
	var once *proc
	pollUntil(t, 60*time.Second, "the Redis door in status -once", func() bool {
		once = runToEnd(t, j.env, "status", "-c", j.bridgeCfg, "-once")
		return strings.Contains(once.logs(), host)
	})
	asJSON := runToEnd(t, j.env, "status", "-c", j.bridgeCfg, "-json", "-once")
	var page string
	pollUntil(t, 60*time.Second, "the Redis door on the status page", func() bool {
		page = j.get(t, "/ui/status")
		return strings.Contains(page, host)
	})
	for _, tc := range []struct{ name, out string }{
		{"status -once", once.logs()}, {"status -json", asJSON.logs()}, {"GET /ui/status", page},
	} {
		if !strings.Contains(tc.out, "rediss://"+host) || strings.Contains(tc.out, "@localhost") || strings.Contains(tc.out, "@127.0.0.1") {
			t.Errorf("%s: got\n%s\nwant the Redis door as rediss://%s and no user info in any URL", tc.name, tc.out, host)
		}
		for _, s := range j.secrets {
			if strings.Contains(tc.out, s) {
				t.Errorf("%s shows the planted secret %q:\n%s", tc.name, s, tc.out)
			}
		}
	}
	return []*proc{once, asJSON}
}

// get reads path from start's HTTPS door with the client certificate
// and the token; the body, whatever the status.
func (j *secretsJob) get(t *testing.T, path string) string {
	t.Helper()
	client := &http.Client{Timeout: 30 * time.Second, Transport: &http.Transport{TLSClientConfig: j.pki.ClientTLS(t, true)}}
	req, _ := http.NewRequest(http.MethodGet, "https://127.0.0.1:"+j.httpPort(t)+path, nil)
	req.Header.Set("Authorization", "Bearer "+plantedToken)
	resp, err := client.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	got, _ := io.ReadAll(resp.Body)
	return string(got)
}

// httpPort is the httpPort of start's config.
func (j *secretsJob) httpPort(t *testing.T) string {
	t.Helper()
	data, err := os.ReadFile(j.cfg)
	if err != nil {
		t.Fatal(err)
	}
	for _, line := range strings.Split(string(data), "\n") {
		if v, ok := strings.CutPrefix(line, "httpPort: "); ok {
			return v
		}
	}
	t.Fatalf("%s has no httpPort", j.cfg)
	return ""
}

// scrapeMetrics reads start's Prometheus endpoint: no secret in any label.
func (j *secretsJob) scrapeMetrics(t *testing.T, start *proc) {
	t.Helper()
	resp, err := http.Get("http://" + j.metrics + "/metrics")
	if err != nil {
		t.Fatalf("metrics: %v\n%s", err, start.logs())
	}
	defer resp.Body.Close()
	got, _ := io.ReadAll(resp.Body)
	if !strings.Contains(string(got), "cluster_serving") {
		t.Errorf("metrics hold no cluster_serving series:\n%.2000s", got)
	}
	for _, s := range j.secrets {
		if strings.Contains(string(got), s) {
			t.Errorf("metrics hold the planted secret %q", s)
		}
	}
}

// inboxConf is README's example nats.conf (Security, NATS) with plain
// passwords for bcrypt ones, plus two users of the test's own: snoop, an
// app user of the old advice, allowed to subscribe _INBOX.>; and admin,
// unrestricted, which publishes the snoop's canary. Keep the service's
// and the app users' permissions as README gives them.
const inboxConf = `
authorization {
  SERVICE = {
    publish: ["$JS.API.>", "$JS.ACK.>", "$SRV.>", "serving.>", "_INBOX_cs.>", "_INBOX_app.>"]
    subscribe: ["$SRV.>", "serving.>", "_INBOX_cs.>"]
    allow_responses: true
  }
  users = [
    {user: serving, password: "svc-pw", permissions: $SERVICE}
    {user: alice, password: "alice-pw", permissions: {publish: "serving.*.predict", subscribe: "_INBOX_app.alice.>"}}
    {user: bob, password: "bob-pw", permissions: {publish: "serving.*.predict", subscribe: "_INBOX_app.bob.>"}}
    {user: snoop, password: "snoop-pw", permissions: {publish: "serving.*.predict", subscribe: "_INBOX.>"}}
    {user: admin, password: "admin-pw"}
  ]
}
`

// spy is a connection that subscribes to subjects its user may or may
// not read and counts what arrives and what the server refuses.
type spy struct {
	nc      *nats.Conn
	mu      sync.Mutex
	got     []string // subjects received
	refused []string // permission violations
}

func newSpy(t *testing.T, url, user string, subjects ...string) *spy {
	t.Helper()
	s := &spy{}
	nc, err := nats.Connect(url, nats.UserInfo(user, user+"-pw"), nats.ErrorHandler(func(_ *nats.Conn, _ *nats.Subscription, err error) {
		if errors.Is(err, nats.ErrPermissionViolation) {
			s.mu.Lock()
			s.refused = append(s.refused, err.Error())
			s.mu.Unlock()
		}
	}))
	if err != nil {
		t.Fatalf("connect as %s: %v", user, err)
	}
	t.Cleanup(nc.Close)
	s.nc = nc
	for _, subj := range subjects {
		if _, err := nc.Subscribe(subj, func(m *nats.Msg) {
			s.mu.Lock()
			s.got = append(s.got, m.Subject)
			s.mu.Unlock()
		}); err != nil {
			t.Fatal(err)
		}
	}
	if err := nc.Flush(); err != nil {
		t.Fatal(err)
	}
	return s
}

func (s *spy) seen() (got, refused []string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]string(nil), s.got...), append([]string(nil), s.refused...)
}

// TestInboxPrivacy runs start on an embedded server with README's
// nats.conf, a worker and an http door as the service user, and sends
// predict traffic through the NATS door as alice and bob (each with the
// inbox prefix their permissions allow) and through both HTTP doors.
// Meanwhile snoop, allowed to subscribe _INBOX.>, and bob, who tries >
// and alice's inboxes, read nothing: no HTTP door result, no pulled
// work, no JetStream API reply, no reply of another user, no work
// subject. Every request is answered, and status works as the service
// user.
func TestInboxPrivacy(t *testing.T) {
	skipIfShort(t)
	ports := freePorts(t, 2)
	cfg, url, job, env := testJob(t, fmt.Sprintf("natsServerConfig: %s\nhttpInterface: 127.0.0.1\nhttpPort: %d\n", writeNATSConf(t, inboxConf), ports[0]))
	start := spawn(t, env, "start", "-c", cfg)
	waitReady(t, url, start, nats.UserInfo("serving", "svc-pw"), nats.CustomInboxPrefix(serving.DefaultInboxPrefix))
	svc := append(env[:len(env):len(env)], "NATS_USER=serving", "NATS_PASSWORD=svc-pw")
	worker := spawn(t, svc, "worker", "-c", cfg, "-nats", url)
	httpCfg := filepath.Join(filepath.Dir(cfg), "http.yaml")
	copyFile(t, cfg, httpCfg)
	door := spawn(t, svc, "http", "-c", rewriteKey(t, httpCfg, "httpPort", fmt.Sprint(ports[1])), "-nats", url)
	waitLog(t, worker, "joined")
	waitLog(t, door, "HTTP door on")
	waitLog(t, start, "Stop with Ctrl-C")

	snoop := newSpy(t, url, "snoop", "_INBOX.>", "_INBOX_cs.>", "serving.>")
	peeker := newSpy(t, url, "bob", ">", "_INBOX_app.>", "_INBOX_app.alice.>", "$JS.API.>")
	var wg sync.WaitGroup
	var answered atomic.Int64
	for _, user := range []string{"alice", "bob"} {
		nc, err := nats.Connect(url, nats.UserInfo(user, user+"-pw"), nats.CustomInboxPrefix("_INBOX_app."+user))
		if err != nil {
			t.Fatal(err)
		}
		defer nc.Close()
		wg.Go(func() {
			sendAdds(t, nc, job, 60, 6, 5*time.Second, func(f float32) [4]float32 { return [4]float32{f, 1, 2, 3} }, &answered)
		})
	}
	for _, port := range ports {
		wg.Go(func() { postAdds(t, fmt.Sprintf("http://127.0.0.1:%d/predict", port), 50) })
	}
	status := runToEnd(t, svc, "status", "-c", cfg, "-once")
	wg.Wait()
	if answered.Load() != 120 {
		t.Errorf("NATS door: %d of 120 requests answered", answered.Load())
	}
	if status.cmd.ProcessState.ExitCode() != 0 || !strings.Contains(status.logs(), job) {
		t.Errorf("status as the service user: exit %d\n%s", status.cmd.ProcessState.ExitCode(), status.logs())
	}
	checkSpies(t, url, snoop, peeker)
	worker.signalAndWait(t, syscall.SIGTERM)
	n := processed(t, worker)
	t.Logf("the service user's worker served %d requests", n)
	if n == 0 {
		t.Errorf("the worker of the service user served nothing")
	}
	door.signalAndWait(t, syscall.SIGTERM)
	start.signalAndWait(t, syscall.SIGTERM)
}

// checkSpies publishes a canary to snoop's _INBOX.> as admin and, once it
// has arrived, checks that it is all snoop read, and that the server
// refused snoop's and the peeker's other subscriptions and they read
// nothing.
func checkSpies(t *testing.T, url string, snoop, peeker *spy) {
	t.Helper()
	admin, err := nats.Connect(url, nats.UserInfo("admin", "admin-pw"))
	if err != nil {
		t.Fatal(err)
	}
	defer admin.Close()
	if err := admin.Publish("_INBOX.canary", nil); err != nil {
		t.Fatal(err)
	}
	if err := admin.Flush(); err != nil {
		t.Fatal(err)
	}
	pollUntil(t, 10*time.Second, "the canary", func() bool {
		got, _ := snoop.seen()
		return len(got) > 0 && got[len(got)-1] == "_INBOX.canary"
	})
	if err := peeker.nc.Flush(); err != nil {
		t.Fatal(err)
	}
	got, refused := snoop.seen()
	if !reflect.DeepEqual(got, []string{"_INBOX.canary"}) {
		t.Errorf("snoop read %d messages of others (%q), want only the canary", len(got)-1, got[:min(len(got), 5)])
	}
	if len(refused) != 2 {
		t.Errorf("snoop: got refusals %q, want _INBOX_cs.> and serving.>", refused)
	}
	got, refused = peeker.seen()
	if len(got) != 0 {
		t.Errorf("bob read %d messages (%q), want none", len(got), got[:min(len(got), 5)])
	}
	if len(refused) != 4 {
		t.Errorf("bob: got refusals %q, want all 4 subscriptions refused", refused)
	}
}

// postAdds posts n add_f32 requests to url, one after the other, and
// reports each wrong answer; it stops at the first that gets none.
func postAdds(t *testing.T, url string, n int) {
	client := &http.Client{Timeout: 10 * time.Second}
	for i := range n {
		resp, err := client.Post(url, "application/json", strings.NewReader(fmt.Sprintf(`{"instances":[{"x":[%d,0,0,0]}]}`, i)))
		if err != nil {
			t.Errorf("POST %s: %v", url, err)
			return
		}
		b, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		got, err := decodePrediction(b)
		if resp.StatusCode != 200 || err != nil || !reflect.DeepEqual(got, []float32{float32(2*i + 1), 1, 1, 1}) {
			t.Errorf("POST %s request %d: got %d %s", url, i, resp.StatusCode, b)
		}
	}
}

func copyFile(t *testing.T, from, to string) {
	t.Helper()
	data, err := os.ReadFile(from)
	if err != nil {
		t.Fatal(err)
	}
	writeFile(t, to, data, 0o644)
}
