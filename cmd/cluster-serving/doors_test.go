package main

// The HTTP and gRPC doors as the commands run them: the config keys they
// take (the gRPC door shares the HTTP door's) and their serving, in start
// and in http.

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"syscall"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"

	"github.com/cluster-serving/cluster-serving/bridge/door"
	httpdoor "github.com/cluster-serving/cluster-serving/bridge/http"
	"github.com/cluster-serving/cluster-serving/bridge/redis"
	"github.com/cluster-serving/cluster-serving/infer/wire/kservepb"
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
	rc, err := redisConfig(file)
	if err == nil {
		t.Fatal("redisConfig without redisUrl: got no error")
	}
	if hc.Addr != httpdoor.DefaultAddr || hc.RequestTimeout != httpdoor.DefaultRequestTimeout ||
		hc.MaxBodyBytes != httpdoor.DefaultMaxBodyBytes || rc.Timeout != redis.DefaultTimeout {
		t.Errorf("template: got HTTP %+v, Redis timeout %v", hc, rc.Timeout)
	}
	file.TokenBucketEnabled = true
	if rate, wait := file.TokenBucket(); rate != serving.DefaultTokensPerSecond || wait != serving.DefaultTokenAcquireTimeout {
		t.Errorf("template token bucket: got %v, %v", rate, wait)
	}
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
	waitProc(t, p, 60*time.Second, "/v2/health/ready 200", func() bool {
		resp, err := http.Get(base + "/v2/health/ready")
		if err != nil {
			return false
		}
		resp.Body.Close()
		return resp.StatusCode == http.StatusOK
	})
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
