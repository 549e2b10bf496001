package main

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	goredis "github.com/redis/go-redis/v9"
	pkcs12 "software.sslmate.com/src/go-pkcs12"

	"github.com/cluster-serving/cluster-serving/bridge/redis"
	"github.com/cluster-serving/cluster-serving/bridge/redis/redistest"
	"github.com/cluster-serving/cluster-serving/embedded/tlstest"
	"github.com/cluster-serving/cluster-serving/mesh/serving"
)

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
	port := addr[strings.LastIndex(addr, ":")+1:]
	j.bridgeCfg = bridgeYAML(t, j.cfg, "redisUrl: rediss://:"+redisTestPassword+"@localhost:"+port,
		"redisSecureEnabled: true", "redisSecureTrustStorePath: "+j.pki.TrustStore(t, pkcs12.Modern2023, "truststore.p12", plantedStorePW),
		"redisSecureTrustStorePassword: "+plantedStorePW, "redisTlsCert: "+j.pki.ClientCert, "redisTlsKey: "+j.pki.ClientKey)
	rewriteKey(t, j.bridgeCfg, "metricsListen", "off")
	j.env = append(j.env, serving.EnvSecretFile+"="+filepath.Join(dir, "secret"), serving.EnvSaltFile+"="+filepath.Join(dir, "salt"))
	j.secrets = []string{plantedPW, plantedToken, redisTestPassword, plantedStorePW, plantedSecret, plantedSalt}
	return j
}

// TestNoSecretInAnyOutput runs every command of a deployment whose every
// secret is planted (see secretsJob), at debug level, through good and
// bad paths: start, predict, status, worker, bridge and http with the
// password in -nats, a request over HTTPS with and without the token, a
// record over mutual-TLS Redis, predict against a dead server with the
// password in its URL, stop and shutdown. No secret may show in any
// output, nor in the Prometheus metrics.
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
	data, _ := os.ReadFile(j.cfg)
	var port string
	for _, line := range strings.Split(string(data), "\n") {
		if v, ok := strings.CutPrefix(line, "httpPort: "); ok {
			port = v
		}
	}
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
// (http) as separate processes with the password in -nats, answers one
// record over mutual-TLS Redis, and stops them.
func (j *secretsJob) runDoors(t *testing.T, withPW string) []*proc {
	t.Helper()
	worker := spawn(t, j.env, "worker", "-c", j.cfg, "-nats", withPW)
	waitLog(t, worker, "joined nats://a:xxxxx@")
	bridge := spawn(t, j.env, "bridge", "-c", j.bridgeCfg, "-nats", withPW)
	waitLog(t, bridge, "serving redis stream")
	ctx := context.Background()
	if err := j.rdb.XAdd(ctx, &goredis.XAddArgs{Stream: j.job, Values: []any{"uri", "s", "data", `{"instances":[{"x":[1,2,3,4]}]}`, "serde", "stream"}}).Err(); err != nil {
		t.Fatal(err)
	}
	pollUntil(t, 60*time.Second, "the record's result", func() bool {
		got, _ := j.rdb.HGet(ctx, redis.ResultKey(j.job, "s"), "value").Result()
		return got != "" && got != redis.NaN
	})
	httpCfg := rewriteKey(t, bridgeYAML(t, j.cfg), "httpPort", fmt.Sprint(freePorts(t, 1)[0]))
	rewriteKey(t, httpCfg, "metricsListen", "off")
	door := spawn(t, j.env, "http", "-c", httpCfg, "-nats", withPW)
	waitLog(t, door, "HTTP door on https://")
	for _, p := range []*proc{worker, bridge, door} {
		p.signalAndWait(t, syscall.SIGTERM)
	}
	return []*proc{worker, bridge, door}
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
