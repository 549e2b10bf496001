package main

// The doors as the commands run them: the config keys they take (the gRPC
// door shares the HTTP door's), and their serving in start, http and
// bridge (the Redis door).

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"reflect"
	"regexp"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	goredis "github.com/redis/go-redis/v9"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
	pkcs12 "software.sslmate.com/src/go-pkcs12"

	"github.com/cluster-serving/cluster-serving/bridge/door"
	httpdoor "github.com/cluster-serving/cluster-serving/bridge/httpdoor"
	"github.com/cluster-serving/cluster-serving/bridge/redisdoor"
	"github.com/cluster-serving/cluster-serving/bridge/redisdoor/redistest"
	"github.com/cluster-serving/cluster-serving/embedded/tlstest"
	"github.com/cluster-serving/cluster-serving/infer"
	"github.com/cluster-serving/cluster-serving/infer/wire"
	"github.com/cluster-serving/cluster-serving/infer/wire/kservepb"
	"github.com/cluster-serving/cluster-serving/mesh"
	"github.com/cluster-serving/cluster-serving/mesh/serving"
)

// TestHTTPConfigKeys maps config.yaml's HTTP keys onto the door's Config:
// zeros, the door's defaults, unless a key says otherwise.
func TestHTTPConfigKeys(t *testing.T) {
	file, err := serving.ParseFile([]byte("modelPath: m\n"))
	if err != nil {
		t.Fatal(err)
	}
	hc := httpConfig(file, file.ServedModels())
	if hc.Addr != "0.0.0.0:10020" || hc.RequestTimeout != 0 || hc.MaxBodyBytes != 0 || hc.TokensPerSecond != 0 || !httpOn(file) {
		t.Errorf("defaults: got %+v", hc)
	}
	if len(hc.Models) != 1 || hc.Models[0].Name != "serving_stream" || hc.Models[0].Job != "serving_stream" {
		t.Errorf("models: got %+v", hc.Models)
	}
	file, err = serving.ParseFile([]byte("modelPath: m\nhttpInterface: 127.0.0.1\nhttpPort: 8080\nhttpRequestTimeout: 1500\n" +
		"httpMaxBodyBytes: 1024\ntokenBucketEnabled: true\ntokensPerSecond: 7\nshutdownGrace: 3\n"))
	if err != nil {
		t.Fatal(err)
	}
	hc = httpConfig(file, file.ServedModels())
	if hc.Addr != "127.0.0.1:8080" || hc.RequestTimeout != 1500*time.Millisecond || hc.MaxBodyBytes != 1024 ||
		hc.TokensPerSecond != 7 || hc.TokenAcquireTimeout != serving.DefaultTokenAcquireTimeout || hc.ShutdownGrace != 3*time.Second {
		t.Errorf("keys: got %+v", hc)
	}
	file, err = serving.ParseFile([]byte("modelPath: m\nhttpTlsCert: c.pem\nhttpTlsKey: k.pem\nhttpTlsClientCa: ca.pem\nhttpAuthTokenFile: t\n"))
	if err != nil {
		t.Fatal(err)
	}
	hc = httpConfig(file, file.ServedModels())
	if hc.TLSCertFile != "c.pem" || hc.TLSKeyFile != "k.pem" || hc.TLSClientCAFile != "ca.pem" || hc.TokenFile != "t" {
		t.Errorf("security keys: got %+v", hc)
	}
	if file, _ = serving.ParseFile([]byte("modelPath: m\nhttpPort: -1\n")); httpOn(file) {
		t.Error("httpPort -1: got the door on, want it off")
	}
}

// TestTemplateStatesTheDoorDefaults checks that the door numbers the
// template writes out are the doors' defaults, which an empty key gets.
func TestTemplateStatesTheDoorDefaults(t *testing.T) {
	file, err := serving.ParseFile(serving.Template("m"))
	if err != nil {
		t.Fatal(err)
	}
	hc := httpConfig(file, file.ServedModels())
	rc, err := redisdoor.FileConfig(file)
	if err == nil {
		t.Fatal("redisConfig without redisUrl: got no error")
	}
	if hc.Addr != httpdoor.DefaultAddr || hc.RequestTimeout != httpdoor.DefaultRequestTimeout ||
		hc.MaxBodyBytes != httpdoor.DefaultMaxBodyBytes || rc.Timeout != redisdoor.DefaultTimeout {
		t.Errorf("template: got HTTP %+v, Redis timeout %v", hc, rc.Timeout)
	}
	file.TokenBucketEnabled = true
	if rate, wait := file.TokenBucket(); rate != serving.DefaultTokensPerSecond || wait != serving.DefaultTokenAcquireTimeout {
		t.Errorf("template token bucket: got %v, %v", rate, wait)
	}
}

// waitHTTPReady waits until the HTTP door of p at base (http://host:port)
// answers /v2/health/ready with 200.
func waitHTTPReady(t *testing.T, p *proc, base string) {
	t.Helper()
	waitProc(t, p, 60*time.Second, "/v2/health/ready 200", func() bool {
		resp, err := http.Get(base + "/v2/health/ready")
		if err != nil {
			return false
		}
		resp.Body.Close()
		return resp.StatusCode == http.StatusOK
	})
}

// TestStartServesHTTP runs `cluster-serving start` with two models and
// checks that the HTTP door becomes ready and serves both.
func TestStartServesHTTP(t *testing.T) {
	dir := t.TempDir()
	ports := freePorts(t, 2)
	port, hp := ports[0], ports[1]
	add, _ := filepath.Abs("../../infer/testdata/add_f32.onnx")
	cls, _ := filepath.Abs("../../infer/testdata/classifier.onnx")
	requireORT(t)
	cfgPath := filepath.Join(dir, "config.yaml")
	cfg := fmt.Sprintf("jobName: h%d\nmodels:\n  - {name: add, path: %s}\n  - {name: cls, version: \"2\", path: %s}\n"+
		"natsListen: 127.0.0.1:%d\nnatsStoreDir: %s\nthreadPerModel: 1\nhttpInterface: 127.0.0.1\nhttpPort: %d\n",
		port, add, cls, port, filepath.Join(dir, "js"), hp)
	writeFile(t, cfgPath, cfg, 0o644)
	p := spawn(t, []string{"XDG_RUNTIME_DIR=" + dir}, "start", "-c", cfgPath)
	base := fmt.Sprintf("http://127.0.0.1:%d", hp)
	waitHTTPReady(t, p, base)
	post := func(path, body string) (int, string) {
		resp, err := http.Post(base+path, "application/json", strings.NewReader(body))
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, string(b)
	}
	st, body := post("/predict", `{"instances":[{"x":[1,2,3,4]}]}`)
	if got, err := decodePrediction([]byte(body)); st != 200 || err != nil || !reflect.DeepEqual(got, []float32{3, 5, 7, 9}) {
		t.Errorf("/predict: got %d %s", st, body)
	}
	st, body = post("/v2/models/cls/versions/2/infer", `{"inputs":[{"name":"x","datatype":"FP32","shape":[1,8],"data":[1,0,0,0,0,0,0,0]}]}`)
	var ans struct {
		Outputs []struct {
			Name  string
			Shape []int64
		}
	}
	if st != 200 || json.Unmarshal([]byte(body), &ans) != nil || len(ans.Outputs) != 1 || ans.Outputs[0].Name != "probs" {
		t.Errorf("infer cls: got %d %s", st, body)
	}
	p.signalAndWait(t, syscall.SIGTERM)
}

// TestHTTPCommand runs `cluster-serving http` against the NATS of a running
// `start` (whose own HTTP door is off) and predicts through it.
func TestHTTPCommand(t *testing.T) {
	cfgPath, url, _, env := testJob(t, "httpPort: -1\n")
	start := spawn(t, env, "start", "-c", cfgPath)
	waitReady(t, url, start)

	hp := freePorts(t, 1)[0]
	data, err := os.ReadFile(cfgPath)
	if err != nil {
		t.Fatal(err)
	}
	httpCfg := filepath.Join(filepath.Dir(cfgPath), "http.yaml")
	cfg := strings.Replace(string(data), "httpPort: -1\n", fmt.Sprintf("httpInterface: 127.0.0.1\nhttpPort: %d\n", hp), 1)
	writeFile(t, httpCfg, cfg, 0o644)
	// nats-server without authorization ignores a password: the one in the
	// URL is there to be hidden by the banner.
	const password = "planted-nats-password-31337"
	door := spawn(t, env, "http", "-c", httpCfg, "-nats", strings.Replace(url, "nats://", "nats://u:"+password+"@", 1))
	base := fmt.Sprintf("http://127.0.0.1:%d", hp)
	waitProc(t, door, 30*time.Second, "the http door to answer", func() bool {
		resp, err := http.Post(base+"/predict", "application/json", strings.NewReader(`{"instances":[{"x":[1,2,3,4]}]}`))
		if err != nil {
			return false
		}
		b, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		got, derr := decodePrediction(b)
		if resp.StatusCode != 200 || derr != nil || !reflect.DeepEqual(got, []float32{3, 5, 7, 9}) {
			t.Fatalf("got %d %s", resp.StatusCode, b)
		}
		return true
	})
	want := fmt.Sprintf("HTTP door on http://127.0.0.1:%d for 1 model(s), queues on NATS nats://u:xxxxx@", hp)
	if !strings.Contains(door.logs(), want) {
		t.Errorf("got\n%s\nwant a banner with %q", door.logs(), want)
	}
	for _, line := range strings.Split(door.logs(), "\n") {
		if strings.Contains(line, "HTTP door on") && strings.Contains(line, password) {
			t.Errorf("the banner shows the NATS password: %s", line)
		}
	}
	door.signalAndWait(t, syscall.SIGTERM)
	start.signalAndWait(t, syscall.SIGTERM)
}

// TestGRPCConfigKeys: grpcPort 0 (the default) leaves the door off; set,
// it listens on httpInterface and takes the HTTP door's shared keys.
func TestGRPCConfigKeys(t *testing.T) {
	file, err := serving.ParseFile(serving.Template("m"))
	if err != nil || grpcOn(file) {
		t.Fatalf("template: got on %v (%v), want the gRPC door off", grpcOn(file), err)
	}
	file, err = serving.ParseFile([]byte("modelPath: m\nhttpInterface: 127.0.0.1\ngrpcPort: 9001\nhttpRequestTimeout: 1500\n" +
		"httpMaxBodyBytes: 1024\nhttpTlsCert: c.pem\nhttpTlsKey: k.pem\nhttpTlsClientCa: ca.pem\nhttpAuthTokenFile: t\n" +
		"tokenBucketEnabled: true\ntokensPerSecond: 7\ntokenAcquireTimeout: 250\n" +
		"httpIdleTimeout: 5000\nhttpReadTimeout: 6000\nhttpWriteTimeout: 7000\nhttpMaxConnections: 9\n"))
	if err != nil {
		t.Fatal(err)
	}
	gc := grpcConfig(file, httpConfig(file, file.ServedModels()))
	if !grpcOn(file) || gc.Addr != "127.0.0.1:9001" || gc.RequestTimeout != 1500*time.Millisecond || gc.MaxRecvBytes != 1024 ||
		gc.TLSCertFile != "c.pem" || gc.TLSKeyFile != "k.pem" || gc.TLSClientCAFile != "ca.pem" || gc.TokenFile != "t" || len(gc.Models) != 1 ||
		gc.TokensPerSecond != 7 || gc.TokenAcquireTimeout != 250*time.Millisecond ||
		gc.Conns != (door.Conns{IdleTimeout: 5 * time.Second, ReadTimeout: 6 * time.Second, WriteTimeout: 7 * time.Second, MaxConnections: 9}) {
		t.Errorf("keys: got %+v", gc)
	}
	for _, bad := range []string{"grpcPort: -1\n", "grpcPort: 70000\n", "httpPort: 9000\ngrpcPort: 9000\n"} {
		if _, err := serving.ParseFile([]byte("modelPath: m\n" + bad)); err == nil || !strings.Contains(err.Error(), "grpcPort") {
			t.Errorf("%q: got %v, want an error naming grpcPort", bad, err)
		}
	}
}

// TestStartServesGRPC runs `cluster-serving start` with grpcPort set and
// calls the door as a KServe client would; the banner shows the grpcurl
// line.
func TestStartServesGRPC(t *testing.T) {
	dir := t.TempDir()
	ports := freePorts(t, 3)
	port, hp, gp := ports[0], ports[1], ports[2]
	add, _ := filepath.Abs("../../infer/testdata/add_f32.onnx")
	requireORT(t)
	cfgPath := filepath.Join(dir, "config.yaml")
	cfg := fmt.Sprintf("jobName: g%d\nmodels:\n  - {name: add, path: %s}\n"+
		"natsListen: 127.0.0.1:%d\nnatsStoreDir: %s\nthreadPerModel: 1\nhttpInterface: 127.0.0.1\nhttpPort: %d\ngrpcPort: %d\n",
		port, add, port, filepath.Join(dir, "js"), hp, gp)
	writeFile(t, cfgPath, cfg, 0o644)
	p := spawn(t, []string{"XDG_RUNTIME_DIR=" + dir}, "start", "-c", cfgPath)
	cc, err := grpc.NewClient(fmt.Sprintf("127.0.0.1:%d", gp), grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	defer cc.Close()
	c := kservepb.NewGRPCInferenceServiceClient(cc)
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	waitProc(t, p, 60*time.Second, "ServerReady true", func() bool {
		r, err := c.ServerReady(ctx, &kservepb.ServerReadyRequest{})
		return err == nil && r.Ready
	})
	resp, err := c.ModelInfer(ctx, &kservepb.ModelInferRequest{ModelName: "add", Inputs: []*kservepb.ModelInferRequest_InferInputTensor{
		{Name: "x", Datatype: "FP32", Shape: []int64{1, 4}, Contents: &kservepb.InferTensorContents{Fp32Contents: []float32{1, 2, 3, 4}}}}})
	if err != nil || len(resp.Outputs) != 1 || !reflect.DeepEqual(resp.Outputs[0].Contents.GetFp32Contents(), []float32{3, 5, 7, 9}) {
		t.Errorf("ModelInfer: got %v %v, want y [3 5 7 9]", resp, err)
	}
	want := fmt.Sprintf("grpcurl -plaintext 127.0.0.1:%d list", gp)
	waitProc(t, p, 30*time.Second, "the banner's grpcurl line", func() bool { return strings.Contains(p.logs(), want) })
	p.signalAndWait(t, syscall.SIGTERM)
}

// These tests run the real binary against a real redis-server: `start`
// (embedded NATS and a worker) with a `bridge` process, and `start` with
// its own Redis door under the Python quick start.

// pollUntil polls cond every 20ms until it holds, and fails the test when
// it still does not after d; what names the awaited state.
func pollUntil(t *testing.T, d time.Duration, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(d)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out after %v waiting for %s", d, what)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

func streamInfo(t *testing.T, nc *nats.Conn, name string) *jetstream.StreamInfo {
	t.Helper()
	js, err := jetstream.New(nc)
	if err != nil {
		t.Fatal(err)
	}
	s, err := js.Stream(context.Background(), name)
	if err != nil {
		t.Fatal(err)
	}
	info, err := s.Info(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	return info
}

// storedResults counts the results in the messages of stream: a results
// batch's (mesh.HeaderBatch) each, one for any other message.
func storedResults(t *testing.T, nc *nats.Conn, name string) int {
	t.Helper()
	js, err := jetstream.New(nc)
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	s, err := js.Stream(ctx, name)
	if err != nil {
		t.Fatal(err)
	}
	info := streamInfo(t, nc, name)
	n := 0
	for seq := info.State.FirstSeq; seq <= info.State.LastSeq; seq++ {
		m, err := s.GetMsg(ctx, seq)
		if err != nil {
			t.Fatalf("%s: message %d: %v", name, seq, err)
		}
		k := 1
		if b := m.Header.Get(mesh.HeaderBatch); b != "" {
			if k, err = strconv.Atoi(b); err != nil {
				t.Fatalf("%s: message %d: batch header %q", name, seq, b)
			}
		}
		n += k
	}
	return n
}

func TestBridgeKilledMidFlightLosesNothing(t *testing.T) {
	skipIfShort(t)
	raddr, rdb := redistest.Start(t)
	cfg, url, job, env := testJob(t, "")
	bridgeCfg := filepath.Join(filepath.Dir(cfg), "bridge.yaml")
	base, err := os.ReadFile(cfg)
	if err != nil {
		t.Fatal(err)
	}
	writeFile(t, bridgeCfg, append(base, "redisUrl: "+raddr+"\n"...), 0o644)
	start := spawn(t, env, "start", "-c", cfg)
	nc := waitReady(t, url, start)
	bridge := spawn(t, env, "bridge", "-c", bridgeCfg, "-nats", url)
	waitLog(t, bridge, "serving redis stream")

	const total = 500
	ctx := context.Background()
	body := func(i int) string {
		f := float32(i)
		return fmt.Sprintf(`{"instances":[{"x":[%g,%g,%g,%g]}]}`, f, -f, f/4, 0.5)
	}
	// The client's XADDs, in small pipelines over about a second; the
	// bridge is killed (-9) halfway, while records are in flight.
	added := make(chan struct{})
	go func() {
		defer close(added)
		for i := 0; i < total; i += 10 {
			_, _ = rdb.Pipelined(ctx, func(p goredis.Pipeliner) error {
				for j := i; j < i+10; j++ {
					p.XAdd(ctx, &goredis.XAddArgs{Stream: job, Values: []any{"uri", fmt.Sprint("rec-", j), "data", body(j), "serde", "stream"}})
				}
				return nil
			})
			time.Sleep(2 * time.Millisecond)
		}
	}()
	pollUntil(t, 30*time.Second, "bridge to take records", func() bool {
		n, _ := rdb.Keys(ctx, redisdoor.ResultKey(job, "*")).Result()
		return len(n) >= 100
	})
	_ = bridge.cmd.Process.Kill()
	<-bridge.done
	done, _ := rdb.Keys(ctx, redisdoor.ResultKey(job, "*")).Result()
	t.Logf("killed the bridge with %d of %d results written", len(done), total)
	<-added

	bridge2 := spawn(t, env, "bridge", "-c", bridgeCfg, "-nats", url)
	// The reference: ONNX Runtime run directly, in the Redis result format.
	if err := infer.Init(requireORT(t)); err != nil {
		t.Fatal(err)
	}
	direct, err := infer.NewSession("../../infer/testdata/add_f32.onnx", 1)
	if err != nil {
		t.Fatal(err)
	}
	defer direct.Close()
	want := func(i int) string {
		f := float32(i)
		out, err := direct.Run([]infer.Tensor{{DType: infer.Float32, Shape: []int64{1, 4}, Data: []float32{f, -f, f / 4, 0.5}}})
		if err != nil {
			t.Fatal(err)
		}
		out[0].Shape = out[0].Shape[1:]
		v, err := wire.EncodeRedisArrow(out)
		if err != nil {
			t.Fatal(err)
		}
		return string(v)
	}
	for i := range total {
		key := redisdoor.ResultKey(job, fmt.Sprint("rec-", i))
		var got string
		pollUntil(t, 90*time.Second, key, func() bool {
			v, err := rdb.HGet(ctx, key, "value").Result()
			got = v
			return err == nil
		})
		if w := want(i); got != w {
			t.Errorf("rec-%d: got %q, want %q", i, got, w)
		}
	}
	pollUntil(t, 30*time.Second, "XLEN 0", func() bool { return rdb.XLen(ctx, job).Val() == 0 })

	// Each record was queued and answered once: the door stores a block
	// of records as one work message and the worker a batch's results as
	// one results message, so a stream holds at most a message per
	// record, and the results messages hold one result per record.
	if work := streamInfo(t, nc, mesh.StreamName(job)); work.State.LastSeq > total {
		t.Errorf("work queue took %d messages, want at most %d (one per record)", work.State.LastSeq, total)
	}
	if n := storedResults(t, nc, mesh.ResultsStreamName(job)); n != total {
		t.Errorf("results stream holds %d results, want %d (one per record)", n, total)
	}
	bridge2.signalAndWait(t, syscall.SIGTERM)
	start.signalAndWait(t, syscall.SIGTERM)
	if n := processed(t, start); n != total {
		t.Errorf("start processed=%d, want %d (each record computed once)", n, total)
	}
}

func TestPythonQuickStart(t *testing.T) {
	skipIfShort(t)
	const py = "/usr/bin/python3"
	if err := exec.Command(py, "-c", "import redis, numpy").Run(); err != nil {
		if os.Getenv("CLUSTER_SERVING_REQUIRE_DEPS") == "1" {
			t.Fatal("python3-redis / python3-numpy missing: apt-get install python3-redis python3-numpy")
		}
		t.Skip("python3-redis / python3-numpy missing: apt-get install python3-redis python3-numpy")
	}
	_, rdb := redistest.Start(t)
	port := rdb.Options().Addr[strings.LastIndex(rdb.Options().Addr, ":")+1:]
	model, err := filepath.Abs("../../bridge/redisdoor/testdata/image_mean.onnx")
	if err != nil {
		t.Fatal(err)
	}
	cfg, url, job, env := testJob(t, "redisUrl: "+rdb.Options().Addr+"\npostProcessing: topN(2)\nimageResize: 224,224\n")
	// testJob serves add_f32; point the config at the image model instead.
	data, _ := os.ReadFile(cfg)
	data = []byte(strings.Replace(string(data), "modelPath: ", "modelPath: "+model+"\n#", 1))
	writeFile(t, cfg, data, 0o644)
	start := spawn(t, env, "start", "-c", cfg)
	waitReady(t, url, start)

	out, err := exec.Command(py, "../../bridge/redisdoor/examples/quick_start.py", "--host", "127.0.0.1", "--port", port, "--job", job, "--timeout", "60").CombinedOutput()
	t.Logf("quick_start.py:\n%s", out)
	if err != nil {
		t.Fatalf("quick_start.py: %v", err)
	}
	// topN(2) of the 5 class scores: [[class,score][class,score]].
	topN := regexp.MustCompile(`^\[\[\d,[0-9.E-]+\]\[\d,[0-9.E-]+\]\]$`)
	for _, img := range []string{"cat1", "dog1", "fish1"} {
		value := ""
		for _, l := range strings.Split(string(out), "\n") {
			if v, ok := strings.CutPrefix(l, img+": "); ok {
				value = v
			}
		}
		if !topN.MatchString(value) {
			t.Errorf("%s: got %q, want a topN(2) string such as [[4,0.2][3,0.19]]", img, value)
		}
	}
}

// redisTestPassword is planted in redisUrl by the security tests; no
// output may hold it.
const redisTestPassword = "pl4nted-redis-pw"

// redisConfig maps the Redis keys: TLS from redisSecureEnabled or
// rediss://, a PEM or PKCS#12 trust store, a client certificate; each
// error names its key and none holds a password.
func TestRedisConfigKeys(t *testing.T) {
	p := tlstest.New(t, "keys")
	p12 := p.TrustStore(t, pkcs12.Modern2023, "truststore.p12", "st0re-pw")
	tests := []struct {
		name     string
		file     serving.File
		tls      bool
		certs    int
		errorKey string
	}{
		{"host:port", serving.File{RedisURL: "127.0.0.1:6379"}, false, 0, ""},
		{"ACL user", serving.File{RedisURL: "redis://door:" + redisTestPassword + "@127.0.0.1:6379/2"}, false, 0, ""},
		{"PEM CA", serving.File{RedisURL: "127.0.0.1:6379", RedisSecureEnabled: true, RedisSecureTrustStorePath: p.CA}, true, 0, ""},
		{"PKCS#12 and client certificate", serving.File{RedisURL: "127.0.0.1:6379", RedisSecureEnabled: true,
			RedisSecureTrustStorePath: p12, RedisSecureTrustStorePassword: "st0re-pw", RedisTLSCert: p.ClientCert, RedisTLSKey: p.ClientKey}, true, 1, ""},
		{"rediss with CA and client certificate", serving.File{RedisURL: "rediss://localhost:6380",
			RedisSecureTrustStorePath: p.CA, RedisTLSCert: p.ClientCert, RedisTLSKey: p.ClientKey}, true, 1, ""},
		{"rediss alone: system roots", serving.File{RedisURL: "rediss://:" + redisTestPassword + "@localhost:6380"}, true, 0, ""},
		{"PKCS#12 wrong password", serving.File{RedisURL: "127.0.0.1:6379", RedisSecureEnabled: true,
			RedisSecureTrustStorePath: p12, RedisSecureTrustStorePassword: redisTestPassword}, false, 0, "redisSecureTrustStorePassword"},
		{"PKCS#12 no password", serving.File{RedisURL: "127.0.0.1:6379", RedisSecureEnabled: true,
			RedisSecureTrustStorePath: p12}, false, 0, "redisSecureTrustStorePassword"},
		{"trust store missing", serving.File{RedisURL: "127.0.0.1:6379", RedisSecureEnabled: true,
			RedisSecureTrustStorePath: filepath.Join(p.Dir, "none.pem")}, false, 0, "redisSecureTrustStorePath"},
		{"client certificate without TLS", serving.File{RedisURL: "redis://127.0.0.1:6379",
			RedisTLSCert: p.ClientCert, RedisTLSKey: p.ClientKey}, false, 0, "redisTlsCert"},
		{"client certificate with the wrong key", serving.File{RedisURL: "rediss://127.0.0.1:6379",
			RedisTLSCert: p.ClientCert, RedisTLSKey: p.ServerKey}, false, 0, "redisTlsCert"},
		{"bad redisUrl", serving.File{RedisURL: "redis://:" + redisTestPassword + "@127.0.0.1:port"}, false, 0, "redisUrl"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			rc, err := redisdoor.FileConfig(&tt.file)
			switch {
			case tt.errorKey != "":
				if err == nil || !strings.Contains(err.Error(), `"`+tt.errorKey+`"`) {
					t.Fatalf("got %v, want an error naming %q", err, tt.errorKey)
				}
				if strings.Contains(err.Error(), redisTestPassword) {
					t.Errorf("error %q holds the password", err)
				}
			case err != nil:
				t.Fatalf("got %v, want no error", err)
			case (rc.TLS != nil) != tt.tls || (rc.TLS != nil && len(rc.TLS.Certificates) != tt.certs):
				t.Errorf("got TLS %v, want TLS %v with %d client certificates", rc.TLS != nil, tt.tls, tt.certs)
			}
		})
	}
}

// bridgeYAML writes a bridge config: base plus lines.
func bridgeYAML(t *testing.T, base string, lines ...string) string {
	t.Helper()
	data, err := os.ReadFile(base)
	if err != nil {
		t.Fatal(err)
	}
	f, err := os.CreateTemp(filepath.Dir(base), "bridge-*.yaml")
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	if _, err := f.WriteString(string(data) + strings.Join(lines, "\n") + "\n"); err != nil {
		t.Fatal(err)
	}
	return f.Name()
}

// A bridge configured with a PKCS#12 trust store, a client certificate
// and a password in a rediss:// redisUrl answers a record written over
// mutual-TLS Redis (redis-server --tls-auth-clients yes, --requirepass);
// a wrong trust store password stops it with an error naming the key.
// Nothing any process prints, at debug level, holds a password.
func TestBridgeOverMutualTLSRedis(t *testing.T) {
	skipIfShort(t)
	p := tlstest.New(t, "bridge")
	addr, rdb := redistest.StartTLS(t, redistest.TLS{Cert: p.ServerCert, Key: p.ServerKey, CA: p.CA, AuthClients: true},
		&goredis.Options{TLSConfig: p.ClientTLS(t, true), Password: redisTestPassword}, "--requirepass", redisTestPassword)
	port := addr[strings.LastIndex(addr, ":")+1:]
	p12 := p.TrustStore(t, pkcs12.Modern2023, "truststore.p12", "st0re-pw")
	cfg, url, job, env := testJob(t, "logLevel: debug\n")
	start := spawn(t, env, "start", "-c", cfg)
	waitReady(t, url, start)
	secure := []string{"redisSecureEnabled: true", "redisSecureTrustStorePath: " + p12,
		"redisTlsCert: " + p.ClientCert, "redisTlsKey: " + p.ClientKey}
	good := bridgeYAML(t, cfg, append(secure, "redisUrl: rediss://:"+redisTestPassword+"@localhost:"+port,
		"redisSecureTrustStorePassword: st0re-pw")...)
	bridge := spawn(t, env, "bridge", "-c", good, "-nats", url)
	waitLog(t, bridge, "serving redis stream")

	ctx := context.Background()
	body := `{"instances":[{"x":[1,2,3,4]}]}`
	if err := rdb.XAdd(ctx, &goredis.XAddArgs{Stream: job, Values: []any{"uri", "mtls", "data", body, "serde", "stream"}}).Err(); err != nil {
		t.Fatal(err)
	}
	var got string
	pollUntil(t, 60*time.Second, "the result over mutual TLS", func() bool {
		got, _ = rdb.HGet(ctx, redisdoor.ResultKey(job, "mtls"), "value").Result()
		return got != ""
	})
	if got == redisdoor.NaN {
		t.Errorf("got %q, want a result", got)
	}

	// A wrong password for the trust store: the bridge stops at once.
	wrong := bridgeYAML(t, cfg, append(secure, "redisUrl: rediss://:"+redisTestPassword+"@localhost:"+port,
		"redisSecureTrustStorePassword: wr0ng-"+redisTestPassword)...)
	failed := spawn(t, env, "bridge", "-c", wrong, "-nats", url)
	select {
	case <-failed.done:
	case <-time.After(30 * time.Second):
		t.Fatal("bridge with a wrong trust store password still runs")
	}
	if !strings.Contains(failed.logs(), `"redisSecureTrustStorePassword"`) {
		t.Errorf("got %q, want an error naming redisSecureTrustStorePassword", failed.logs())
	}
	t.Logf("bridge with a wrong trust store password:\n%s", failed.logs())

	// A wrong Redis password: Redis refuses it, the bridge says so and retries.
	wrongRedis := bridgeYAML(t, cfg, append(secure, "redisUrl: rediss://:wr0ng-"+redisTestPassword+"@localhost:"+port,
		"redisSecureTrustStorePassword: st0re-pw")...)
	refused := spawn(t, env, "bridge", "-c", wrongRedis, "-nats", url)
	waitLog(t, refused, "WRONGPASS")
	refused.signalAndWait(t, syscall.SIGTERM)
	bridge.signalAndWait(t, syscall.SIGTERM)
	start.signalAndWait(t, syscall.SIGTERM)
	t.Logf("bridge:\n%s", bridge.logs())
	for _, pr := range []*proc{start, bridge, failed, refused} {
		if strings.Contains(pr.logs(), redisTestPassword) {
			t.Errorf("%v printed a password:\n%s", pr.cmd.Args[1:], pr.logs())
		}
	}
}
