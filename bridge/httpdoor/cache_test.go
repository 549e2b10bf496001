package httpdoor_test

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"io"
	"net"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"

	"github.com/cluster-serving/cluster-serving/bridge/door"
	"github.com/cluster-serving/cluster-serving/bridge/door/doortest"
	grpcdoor "github.com/cluster-serving/cluster-serving/bridge/grpcdoor"
	httpdoor "github.com/cluster-serving/cluster-serving/bridge/httpdoor"
	"github.com/cluster-serving/cluster-serving/infer/wire"
	"github.com/cluster-serving/cluster-serving/infer/wire/kservepb"
	"github.com/cluster-serving/cluster-serving/mesh"
	"github.com/cluster-serving/cluster-serving/mesh/meshtest"
)

// The response cache tests run the whole path on real parts: an
// embedded NATS server, a worker per model on the real add_f32 engine
// whose Predictor stores in the cache (CS_CACHE) when its model enables
// it, and door processes, each with its own NATS connection, client and
// cache, as separate nodes have.

// cacheMesh is the mesh of the response cache tests.
type cacheMesh struct {
	*doortest.Mesh
	cfg door.Config // the doors' config: the models, with their Config, and a logger that discards
}

// startCacheMesh runs a worker of add_f32 for each model name, storing
// in the response cache for those named in cached.
func startCacheMesh(tb testing.TB, names []string, cached ...string) *cacheMesh {
	tb.Helper()
	ms := make([]doortest.Served, len(names))
	for i, name := range names {
		ms[i] = doortest.Served{Name: name, File: "add_f32", Cached: slices.Contains(cached, name)}
	}
	m := &cacheMesh{}
	m.Mesh = doortest.StartMesh(tb, &m.cfg, ms...)
	for i, sv := range ms {
		m.cfg.Models[i].Config = &kservepb.ModelConfig{Name: sv.Name, ResponseCache: &kservepb.ModelResponseCache{Enable: sv.Cached}}
	}
	return m
}

// cacheDoor is one door process on the mesh.
type cacheDoor struct {
	*env
	cache *mesh.Cache // nil: the door has none
	cfg   door.Config // what the door runs with
}

// door runs an HTTP door with its own connection, client and, with
// cached, its own response cache (counts served on the mesh).
func (m *cacheMesh) door(tb testing.TB, cached bool) *cacheDoor {
	tb.Helper()
	nc, client := m.connect(tb)
	d := &cacheDoor{cfg: m.cfg}
	if cached {
		d.cache = m.cacheOn(tb, nc)
		d.cfg.Cache = d.cache
	}
	srv, err := httpdoor.New(client, httpdoor.Config{Config: d.cfg})
	if err != nil {
		tb.Fatal(err)
	}
	d.env = serveDoor(tb, srv, "127.0.0.1:0", false)
	d.env.nc, d.env.client = nc, client
	return d
}

// connect is a door process's own connection to the mesh and its
// client over it.
func (m *cacheMesh) connect(tb testing.TB) (*nats.Conn, *mesh.Client) {
	tb.Helper()
	nc := m.Connect(tb)
	client, err := mesh.NewClient(nc, mesh.ClientConfig{})
	if err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(func() { _ = client.Close() })
	return nc, client
}

// cacheOn is a door's response cache over nc, its counts served.
func (m *cacheMesh) cacheOn(tb testing.TB, nc *nats.Conn) *mesh.Cache {
	tb.Helper()
	c, err := mesh.NewCache(nc, mesh.CacheConfig{Logger: m.cfg.Logger})
	if err != nil {
		tb.Fatal(err)
	}
	stop, err := c.ServeCounts()
	if err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(stop)
	return c
}

// cachedBody is an OIP JSON request of add_f32 of id, two rows.
func cachedBody(id string) string {
	return `{"id":"` + id + `","inputs":[{"name":"x","datatype":"FP32","shape":[2,4],"data":[1,2,3,4,5,6,7,8]}]}`
}

// oipAnswer is the part of an OIP answer the tests read.
type oipAnswer struct {
	ModelName string `json:"model_name"`
	ID        string `json:"id"`
	Outputs   []struct {
		Name     string    `json:"name"`
		Datatype string    `json:"datatype"`
		Shape    []int64   `json:"shape"`
		Data     []float32 `json:"data"`
	} `json:"outputs"`
}

// infer posts body to model's infer route at d and returns its answer.
func (d *cacheDoor) infer(tb testing.TB, model, body string) oipAnswer {
	tb.Helper()
	st, b := call(tb, http.MethodPost, d.url+"/v2/models/"+model+"/infer", body)
	if st != http.StatusOK {
		tb.Fatalf("infer %s: status %d: %s", model, st, b)
	}
	var a oipAnswer
	if err := json.Unmarshal(b, &a); err != nil {
		tb.Fatalf("answer %s: %v", b, err)
	}
	return a
}

// hits is the hits d's cache counted for job.
func (d *cacheDoor) hits(job string) uint64 { return d.cache.Counts()[job].CacheHit.Count }

// modelStats reads model's statistics through d (the mesh's sums).
func (d *cacheDoor) modelStats(tb testing.TB, model string) (executions, inferences, hits, misses, successes uint64) {
	tb.Helper()
	st, b := call(tb, http.MethodGet, d.url+"/v2/models/"+model+"/stats", "")
	var s statsJSON
	if err := json.Unmarshal(b, &s); st != http.StatusOK || err != nil || len(s.ModelStats) != 1 {
		tb.Fatalf("stats %s: status %d, %v: %s", model, st, err, b)
	}
	ms := s.ModelStats[0]
	return ms.ExecutionCount, ms.InferenceCount, ms.InferenceStats["cache_hit"].Count, ms.InferenceStats["cache_miss"].Count,
		ms.InferenceStats["success"].Count
}

// sameOutputs fails tb unless got has want's outputs.
func sameOutputs(tb testing.TB, what string, got, want oipAnswer) {
	tb.Helper()
	g, _ := json.Marshal(got.Outputs)
	w, _ := json.Marshal(want.Outputs)
	if !bytes.Equal(g, w) {
		tb.Errorf("%s: outputs %s, want %s", what, g, w)
	}
}

// TestResponseCache checks the cache end to end: the first request of a
// cache-enabled model runs it and the worker stores its outputs; the
// repeats, with other ids, in the binary form and over gRPC, through the
// same door, another door process and a gRPC door, are answered from the
// cache, each with its own id; the model runs once, and the statistics
// extension counts the hits of every door. A model without the cache
// runs every time and is never counted.
func TestResponseCache(t *testing.T) {
	m := startCacheMesh(t, []string{"add", "plain"}, "add")
	a, b := m.door(t, true), m.door(t, true)

	first := a.infer(t, "add", cachedBody("1"))
	if first.ID != "1" || len(first.Outputs) != 1 || len(first.Outputs[0].Data) != 8 {
		t.Fatalf("first answer: %+v", first)
	}
	if ex, _, hits, misses, _ := a.modelStats(t, "add"); ex != 1 || hits != 0 || misses != 1 {
		t.Fatalf("after the first request: executions %d, hits %d, misses %d; want 1, 0, 1", ex, hits, misses)
	}
	again := a.infer(t, "add", cachedBody("2"))
	if again.ID != "2" || a.hits("add") != 1 {
		t.Errorf("a repeat: id %q, hits %d; want id 2 and a hit", again.ID, a.hits("add"))
	}
	sameOutputs(t, "a repeat", again, first)
	other := b.infer(t, "add", cachedBody("3"))
	if other.ID != "3" || b.hits("add") != 1 {
		t.Errorf("a repeat at another door: id %q, hits %d; want id 3 and a hit", other.ID, b.hits("add"))
	}
	sameOutputs(t, "another door", other, first)

	y := binaryRepeat(t, a, first)
	grpcRepeat(t, m, first, y)

	ex, inferences, hits, misses, successes := b.modelStats(t, "add")
	if ex != 1 || inferences != 2 || hits != 4 || misses != 1 || successes != 5 {
		t.Errorf("add: executions %d, inferences %d, hits %d, misses %d, successes %d; want 1, 2 (the one run's rows), 4, 1, 5",
			ex, inferences, hits, misses, successes)
	}
	a.infer(t, "plain", cachedBody("1"))
	a.infer(t, "plain", cachedBody("2"))
	ex, _, hits, misses, _ = a.modelStats(t, "plain")
	if _, counted := a.cache.Counts()["plain"]; ex != 2 || hits != 0 || misses != 0 || counted {
		t.Errorf("plain: executions %d, hits %d, misses %d, counted at the door %v; want 2, 0, 0, false", ex, hits, misses, counted)
	}
}

// binaryRepeat repeats first's request at d asking for binary outputs,
// checks it is a hit answered in binary with first's data, and returns
// y's raw bytes.
func binaryRepeat(tb testing.TB, d *cacheDoor, first oipAnswer) []byte {
	tb.Helper()
	hits := d.hits("add")
	body := strings.Replace(cachedBody("bin"), `]}]}`, `]}],"parameters":{"binary_data_output":true}}`, 1)
	req, _ := http.NewRequest(http.MethodPost, d.url+"/v2/models/add/infer", strings.NewReader(body))
	resp, b := do(tb, req)
	n, err := strconv.Atoi(resp.Header.Get(wire.HeaderInferenceContentLength))
	if resp.StatusCode != http.StatusOK || err != nil || n > len(b) {
		tb.Fatalf("binary repeat: status %d, header length %q: %s", resp.StatusCode, resp.Header.Get(wire.HeaderInferenceContentLength), b)
	}
	var head oipAnswer
	if err := json.Unmarshal(b[:n], &head); err != nil || head.ID != "bin" {
		tb.Fatalf("binary repeat: header %s: %v", b[:n], err)
	}
	raw := b[n:]
	if !bytes.Equal(raw, doortest.F32Bytes(first.Outputs[0].Data...)) || d.hits("add") != hits+1 {
		tb.Errorf("binary repeat: raw %v, hits %d; want %v's bytes from a hit", raw, d.hits("add")-hits, first.Outputs[0].Data)
	}
	return raw
}

// grpcRepeat repeats first's request over a gRPC door of its own and
// checks it is a hit answered with y's raw bytes.
func grpcRepeat(tb testing.TB, m *cacheMesh, first oipAnswer, y []byte) {
	tb.Helper()
	nc, client := m.connect(tb)
	cache := m.cacheOn(tb, nc)
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		tb.Fatal(err)
	}
	cfg := m.cfg
	cfg.Addr, cfg.Cache = ln.Addr().String(), cache
	gd, err := grpcdoor.New(client, grpcdoor.Config{Config: cfg})
	if err != nil {
		tb.Fatal(err)
	}
	meshtest.Run(tb, func(ctx context.Context) error { return gd.Serve(ctx, ln) })
	conn, err := grpc.NewClient("passthrough:///"+ln.Addr().String(), grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(func() { _ = conn.Close() })
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	res, err := kservepb.NewGRPCInferenceServiceClient(conn).ModelInfer(ctx, &kservepb.ModelInferRequest{ModelName: "add", Id: "grpc",
		Inputs:           []*kservepb.ModelInferRequest_InferInputTensor{{Name: "x", Datatype: "FP32", Shape: []int64{2, 4}}},
		RawInputContents: [][]byte{doortest.F32Bytes(1, 2, 3, 4, 5, 6, 7, 8)}})
	if err != nil {
		tb.Fatal(err)
	}
	if res.Id != "grpc" || len(res.RawOutputContents) != 1 || !bytes.Equal(res.RawOutputContents[0], y) || cache.Counts()["add"].CacheHit.Count != 1 {
		tb.Errorf("gRPC repeat: id %q, raw %v, hits %d; want id grpc, %v from a hit", res.Id, res.RawOutputContents, cache.Counts()["add"].CacheHit.Count, first.Outputs[0].Data)
	}
}

// TestResponseCacheOffNeverTouchesBucket checks that requests of models
// without the cache, through a door that has one, neither make nor read
// the bucket, and are not counted.
func TestResponseCacheOffNeverTouchesBucket(t *testing.T) {
	m := startCacheMesh(t, []string{"plain"})
	d := m.door(t, true)
	for i := range 3 {
		d.infer(t, "plain", cachedBody(strconv.Itoa(i)))
	}
	js, err := jetstream.New(d.nc)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := js.KeyValue(context.Background(), mesh.CacheBucket); !errors.Is(err, jetstream.ErrBucketNotFound) {
		t.Errorf("bucket after requests of a model without the cache: got %v, want none", err)
	}
	if got := d.cache.Counts(); len(got) != 0 {
		t.Errorf("counted %v, want nothing", got)
	}
}

// TestResponseCacheOutage checks that a cache that cannot answer is a
// miss, never an error: the bucket deleted under the doors and workers
// (the model answers, and hits come back once a door made the bucket
// again), and a door whose cache's connection is closed.
func TestResponseCacheOutage(t *testing.T) {
	m := startCacheMesh(t, []string{"add"}, "add")
	d := m.door(t, true)
	first := d.infer(t, "add", cachedBody("1"))
	d.infer(t, "add", cachedBody("2"))
	if d.hits("add") != 1 {
		t.Fatalf("hits %d before the outage, want 1", d.hits("add"))
	}
	js, err := jetstream.New(d.nc)
	if err != nil {
		t.Fatal(err)
	}
	if err := js.DeleteKeyValue(context.Background(), mesh.CacheBucket); err != nil {
		t.Fatal(err)
	}
	sameOutputs(t, "during the outage", d.infer(t, "add", cachedBody("3")), first)
	meshtest.WaitFor(t, "a hit once the bucket is made again", func() bool {
		before := d.hits("add")
		sameOutputs(t, "after the outage", d.infer(t, "add", cachedBody("4")), first)
		return d.hits("add") > before
	})

	closed := m.Connect(t)
	dead, err := mesh.NewCache(closed, mesh.CacheConfig{Logger: m.cfg.Logger})
	if err != nil {
		t.Fatal(err)
	}
	closed.Close()
	c := m.door(t, false)
	cfg := c.cfg
	cfg.Cache = dead
	srv, err := httpdoor.New(c.client, httpdoor.Config{Config: cfg})
	if err != nil {
		t.Fatal(err)
	}
	deadDoor := &cacheDoor{env: serveDoor(t, srv, "127.0.0.1:0", false), cache: dead}
	sameOutputs(t, "a door whose cache is cut off", deadDoor.infer(t, "add", cachedBody("5")), first)
	if got := dead.Counts()["add"]; got.CacheHit.Count != 0 || got.CacheMiss.Count != 1 {
		t.Errorf("cut-off cache: counted %+v, want one miss", got)
	}
}

// BenchmarkResponseCache compares, one caller at a time, a request
// answered from the response cache (a hit at the door) with the same
// request of a model without the cache (a trip to a worker and a run of
// add_f32), and reports each one's ns/op and their ratio: over HTTP
// (ns/op is a hit's, run-ns/op a run's, run/hit), and at the door's
// inference step alone, door.Config.Submit, without HTTP
// (submit-hit-ns/op, submit-run-ns/op, submit-run/hit). "off-ns/op" is
// the uncached model through a door without a cache at all: next to
// run-ns/op it shows what the cache costs a model that does not enable
// it.
func BenchmarkResponseCache(b *testing.B) {
	m := startCacheMesh(b, []string{"add", "plain"}, "add")
	d, off := m.door(b, true), m.door(b, false)
	body := cachedBody("bench")
	d.infer(b, "add", body) // stored: every later one hits
	post := func(url string) {
		resp, err := httpClient.Post(url, "application/json", strings.NewReader(body))
		if err != nil {
			b.Fatal(err)
		}
		_, _ = io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
		if resp.StatusCode != http.StatusOK {
			b.Fatalf("status %d", resp.StatusCode)
		}
	}
	timed := func(url string) time.Duration {
		start := time.Now()
		for range b.N {
			post(url)
		}
		return time.Since(start)
	}
	b.ResetTimer()
	hit := timed(d.url + "/v2/models/add/infer")
	run := timed(d.url + "/v2/models/plain/infer")
	noCache := timed(off.url + "/v2/models/plain/infer")
	submitHit, submitRun := timedSubmit(b, d, "add", body), timedSubmit(b, d, "plain", body)
	b.StopTimer()
	if d.hits("add") < uint64(2*b.N) {
		b.Fatalf("%d hits of %d requests", d.hits("add"), 2*b.N)
	}
	n := float64(b.N)
	b.ReportMetric(float64(hit.Nanoseconds())/n, "ns/op")
	b.ReportMetric(float64(run.Nanoseconds())/n, "run-ns/op")
	b.ReportMetric(float64(noCache.Nanoseconds())/n, "off-ns/op")
	b.ReportMetric(float64(run)/float64(hit), "run/hit")
	b.ReportMetric(float64(submitHit.Nanoseconds())/n, "submit-hit-ns/op")
	b.ReportMetric(float64(submitRun.Nanoseconds())/n, "submit-run-ns/op")
	b.ReportMetric(float64(submitRun)/float64(submitHit), "submit-run/hit")
}

// timedSubmit times b.N calls of d's inference step (door.Config.Submit)
// with body for model.
func timedSubmit(b *testing.B, d *cacheDoor, model, body string) time.Duration {
	var m door.Model
	for _, o := range d.cfg.Models {
		if o.Name == model {
			m = o
		}
	}
	req := mesh.Request{ContentType: wire.MediaTypeOIP, Body: []byte(body)}
	start := time.Now()
	for range b.N {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		_, err := d.cfg.Submit(ctx, d.client, m, req)
		cancel()
		if err != nil {
			b.Fatal(err)
		}
	}
	return time.Since(start)
}
