package httpdoor_test

import (
	"context"
	"encoding/json"
	"io"
	"net"
	"net/http"
	"runtime"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats.go"

	"github.com/cluster-serving/cluster-serving/bridge/door/doortest"
	httpdoor "github.com/cluster-serving/cluster-serving/bridge/httpdoor"
	"github.com/cluster-serving/cluster-serving/infer"
	"github.com/cluster-serving/cluster-serving/infer/infertest"
	"github.com/cluster-serving/cluster-serving/mesh"
)

// These tests run the door against the real mesh: an embedded NATS server on
// a random port, JetStream work queues, Workers and real engines (through
// their wire.Predictor) on the generated models of infer/testdata. They fail in CI
// (CLUSTER_SERVING_REQUIRE_DEPS=1) and skip elsewhere when ONNX Runtime is
// missing.

func modelPath(name string) string { return infertest.Model(name) }

// served is one model behind the door (see doortest.Served): its file, or
// a Predictor standing in for the engine (then info describes it).
type served struct {
	name, version, file string
	predictor           mesh.Predictor
	info                infer.ModelInfo
	stream              mesh.StreamConfig // Job is filled in
	noWorker            bool
	engineCfg           infer.Config
}

type env struct {
	url    string // http:// or, with TLSCertFile, https:// and the address
	addr   string // host:port the door listens on
	nc     *nats.Conn
	client *mesh.Client
	stop   func() // stops the door (graceful), idempotent
}

// startDoor runs the mesh for models and the door (cfg.Models is filled
// in) on 127.0.0.1:0.
func startDoor(tb testing.TB, cfg httpdoor.Config, models ...served) *env {
	tb.Helper()
	return startDoorOn(tb, "127.0.0.1:0", cfg, models...)
}

// startDoorOn is startDoor on the listen address addr.
func startDoorOn(tb testing.TB, addr string, cfg httpdoor.Config, models ...served) *env {
	tb.Helper()
	ms := make([]doortest.Served, len(models))
	for i, m := range models {
		ms[i] = doortest.Served{Name: m.name, Version: m.version, File: m.file, Predictor: m.predictor, Info: m.info,
			Stream: m.stream, NoWorker: m.noWorker, Engine: m.engineCfg}
	}
	m := doortest.StartMesh(tb, &cfg.Config, ms...)
	door, err := httpdoor.New(m.Client, cfg)
	if err != nil {
		tb.Fatal(err)
	}
	e := serveDoor(tb, door, addr, cfg.TLSCertFile != "")
	e.nc, e.client = m.NC, m.Client
	return e
}

// serveDoor serves door on addr until the test ends or env.stop.
func serveDoor(tb testing.TB, door *httpdoor.Server, addr string, https bool) *env {
	tb.Helper()
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		tb.Fatal(err)
	}
	dctx, dcancel := context.WithCancel(context.Background())
	served := make(chan error, 1)
	go func() { served <- door.Serve(dctx, ln) }()
	var stopped bool
	stop := func() {
		if stopped {
			return
		}
		stopped = true
		dcancel()
		if err := <-served; err != nil {
			tb.Errorf("Serve: %v", err)
		}
	}
	tb.Cleanup(stop)
	scheme := "http://"
	if https {
		scheme = "https://"
	}
	return &env{url: scheme + ln.Addr().String(), addr: ln.Addr().String(), stop: stop}
}

var httpClient = &http.Client{
	Timeout:   30 * time.Second,
	Transport: &http.Transport{MaxIdleConnsPerHost: 256, MaxConnsPerHost: 256},
}

// call sends method url body and returns the status and body.
func call(tb testing.TB, method, url, body string) (int, []byte) {
	tb.Helper()
	var r io.Reader
	if body != "" {
		r = strings.NewReader(body)
	}
	req, err := http.NewRequest(method, url, r)
	if err != nil {
		tb.Fatal(err)
	}
	if body != "" {
		req.Header.Set("Content-Type", "application/json")
	}
	resp, b := do(tb, req)
	return resp.StatusCode, b
}

// do sends req with httpClient and returns the answer and its whole body.
func do(tb testing.TB, req *http.Request) (*http.Response, []byte) {
	tb.Helper()
	resp, err := httpClient.Do(req)
	if err != nil {
		tb.Fatal(err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		tb.Fatal(err)
	}
	return resp, b
}

// predictions unwraps a /predict answer into each record's {"data","shape"}.
func predictions(tb testing.TB, body []byte) []tensorJSON {
	tb.Helper()
	var resp struct{ Predictions []string }
	if err := json.Unmarshal(body, &resp); err != nil {
		tb.Fatalf("answer %.300s: %v", body, err)
	}
	out := make([]tensorJSON, len(resp.Predictions))
	for i, p := range resp.Predictions {
		var v struct{ Value string }
		if err := json.Unmarshal([]byte(p), &v); err != nil {
			tb.Fatalf("prediction %s: %v", p, err)
		}
		if err := json.Unmarshal([]byte(v.Value), &out[i]); err != nil {
			tb.Fatalf("value %s: %v", v.Value, err)
		}
	}
	return out
}

type tensorJSON struct {
	Data  []float64 `json:"data"`
	Shape []int64   `json:"shape"`
}

// errorOf returns the "error" of an error answer, failing when there is none.
func errorOf(tb testing.TB, body []byte) string {
	tb.Helper()
	var e struct {
		Error string `json:"error"`
	}
	if err := json.Unmarshal(body, &e); err != nil || e.Error == "" {
		tb.Fatalf("answer %.300s is not {\"error\": ...}: %v", body, err)
	}
	return e.Error
}

// blockingPredictor stands in for an engine that never finishes in time.
type blockingPredictor struct{ release chan struct{} }

func (b blockingPredictor) Predict(ctx context.Context, _ string, body []byte) ([]byte, error) {
	select {
	case <-b.release:
		return body, nil
	case <-ctx.Done():
		return nil, ctx.Err()
	}
}

func runtimeProcs() int { return runtime.GOMAXPROCS(0) }

// ctxUntil is a context that ends when stop closes.
func ctxUntil(stop <-chan struct{}) context.Context {
	ctx, cancel := context.WithCancel(context.Background())
	go func() { <-stop; cancel() }()
	return ctx
}

// waitService polls until the NATS micro service answers.
func waitService(tb testing.TB, nc *nats.Conn) {
	tb.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for {
		if _, err := nc.Request("$SRV.PING."+mesh.ServiceName, nil, time.Second); err == nil {
			return
		}
		if time.Now().After(deadline) {
			tb.Fatal("NATS service never answered")
		}
		time.Sleep(10 * time.Millisecond)
	}
}
