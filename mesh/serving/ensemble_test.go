package serving_test

import (
	"context"
	"encoding/base64"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/cluster-serving/cluster-serving/infer"
	"github.com/cluster-serving/cluster-serving/infer/infertest"
	"github.com/cluster-serving/cluster-serving/infer/wire"
	"github.com/cluster-serving/cluster-serving/mesh"
	"github.com/cluster-serving/cluster-serving/mesh/serving"
)

const twoIOModel = "../../infer/testdata/two_io.onnx" // sum = a+b, prod = a*b, [batch,3]

// diamondConfig is an ensemble whose steps form a diamond: step 0 feeds
// steps 1 and 2, which run in parallel, and step 3 joins them. For x it
// answers OUT = 3x + x³ (S = 2x, P = x², S2 = 3x, P2 = x³).
var diamondConfig = func() string {
	b, err := os.ReadFile("../../infer/testdata/diamond.pbtxt")
	if err != nil {
		panic(err)
	}
	return string(b)
}()

// putEnsemble writes an ensemble's config.pbtxt and its empty version
// directory 1, as Triton's repositories hold them.
func putEnsemble(tb testing.TB, repo, name, config string) {
	tb.Helper()
	if err := os.MkdirAll(filepath.Join(repo, name, "1"), 0o755); err != nil {
		tb.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(repo, name, "config.pbtxt"), []byte(config), 0o644); err != nil {
		tb.Fatal(err)
	}
}

// TestEnsembleDiamond serves a diamond ensemble beside its composing
// model and a broken ensemble: the diamond answers 3x + x³ for a batch
// of two rows, the broken one is UNAVAILABLE with Triton's reason while
// the rest serves, and the composing model counted every step.
func TestEnsembleDiamond(t *testing.T) {
	repo := t.TempDir()
	putModel(t, repo, "two_io", "1", "model.onnx", twoIOModel)
	putEnsemble(t, repo, "diamond", diamondConfig)
	putEnsemble(t, repo, "broken", strings.ReplaceAll(strings.ReplaceAll(diamondConfig, `"diamond"`, `"broken"`), `model_name: "two_io" input_map { key: "a" value: "S" }`, `model_name: "nosuch" input_map { key: "a" value: "S" }`))
	n := runReady(t, repoConfig(t, repo, "ens", 0))
	if e := index(n, "broken"); e.State != serving.StateUnavailable || !strings.Contains(e.Reason, "depends on 'nosuch' which is not available") {
		t.Fatalf("broken: %+v", e)
	}
	if e := index(n, "diamond"); e.State != serving.StateReady {
		t.Fatalf("diamond: %+v", e)
	}
	c := clientOf(t, n)
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	res, err := c.Submit(ctx, "ens-diamond", mesh.Request{ContentType: wire.MediaTypeOIP,
		Body: []byte(`{"inputs":[{"name":"IN","datatype":"FP32","shape":[2,3],"data":[1,2,3,-1,0,0.5]}]}`)})
	if err != nil {
		t.Fatal(err)
	}
	// 3x + x³: 4, 14, 36, -4, 0, 1.625
	if want := `"data":[4,14,36,-4,0,1.625]`; !strings.Contains(string(res.Body), want) {
		t.Fatalf("answer %s lacks %s", res.Body, want)
	}
	res, err = c.Submit(ctx, "ens-diamond", mesh.Request{ContentType: wire.MediaTypeJSON,
		Body: []byte(`{"instances":[{"IN":[1,2,3]},{"IN":[-1,0,0.5]}]}`)})
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("instances: %s", res.Body)
	stats, err := c.StatsOf(ctx, "ens-diamond", "ens-two_io")
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("stats: %+v", stats)
	// As Triton's: the ensemble counts its requests and rows, and its
	// compute is its steps' summed.
	ens, step := stats["ens-diamond"].InferStats, stats["ens-two_io"].InferStats
	if ens.Success.Count != 2 || ens.InferenceCount != 4 || step.Success.Count != 8 {
		t.Errorf("counts: diamond %d requests %d rows, two_io %d requests: want 2, 4, 8", ens.Success.Count, ens.InferenceCount, step.Success.Count)
	}
	if ens.ComputeInput.NS != step.ComputeInput.NS || ens.ComputeInfer.NS != step.ComputeInfer.NS || ens.ComputeOutput.NS != step.ComputeOutput.NS {
		t.Errorf("diamond's compute %v %v %v, two_io's %v %v %v: want the same sums", ens.ComputeInput, ens.ComputeInfer, ens.ComputeOutput,
			step.ComputeInput, step.ComputeInfer, step.ComputeOutput)
	}
}

// TestEnsembleStepOnAnotherProcess serves the diamond from a node told
// to run only the ensemble's worker (serveModels): its step model is
// described, not served, so the pipeline waits until a second node that
// serves only two_io joins the same NATS, and then answers.
func TestEnsembleStepOnAnotherProcess(t *testing.T) {
	repo := t.TempDir()
	putModel(t, repo, "two_io", "1", "model.onnx", twoIOModel)
	putEnsemble(t, repo, "diamond", diamondConfig)
	cfg := repoConfig(t, repo, "ens", 0)
	cfg.Repository.Serve = []string{"diamond"}
	n := runReady(t, cfg)
	if got := n.Repository().Index(true); len(got) != 2 {
		t.Fatalf("index %+v: want two_io and diamond READY", got)
	}
	c := clientOf(t, n)
	body := []byte(`{"inputs":[{"name":"IN","datatype":"FP32","shape":[1,3],"data":[1,2,3]}]}`)
	short, cancel := context.WithTimeout(context.Background(), 500*time.Millisecond)
	defer cancel()
	if _, err := c.Submit(short, "ens-diamond", mesh.Request{ContentType: wire.MediaTypeOIP, Body: body}); err == nil {
		t.Fatal("the diamond answered with no worker of two_io running")
	}
	step := repoConfig(t, repo, "ens", 0)
	step.URL, step.Repository.Serve = n.URL(), []string{"two_io"}
	runReady(t, step)
	ctx, cancel2 := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel2()
	res, err := c.Submit(ctx, "ens-diamond", mesh.Request{ContentType: wire.MediaTypeOIP, Body: body})
	if err != nil {
		t.Fatal(err)
	}
	if want := `"data":[4,14,36]`; !strings.Contains(string(res.Body), want) {
		t.Fatalf("answer %s lacks %s", res.Body, want)
	}
}

// TestEnsembleFollowsItsSteps unloads the diamond's step model: the
// diamond stops serving too, with a reason that names the step; loading
// the step model brings the diamond back, answering.
func TestEnsembleFollowsItsSteps(t *testing.T) {
	repo := t.TempDir()
	putModel(t, repo, "two_io", "1", "model.onnx", twoIOModel)
	putEnsemble(t, repo, "diamond", diamondConfig)
	n := runReady(t, repoConfig(t, repo, "ens", 0))
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	if err := n.Repository().Unload(ctx, "two_io"); err != nil {
		t.Fatal(err)
	}
	if e := index(n, "diamond"); e.State != serving.StateUnavailable || !strings.Contains(e.Reason, `"two_io" does not serve`) {
		t.Fatalf("diamond after its step's unload: %+v", e)
	}
	if err := n.Repository().Load(ctx, "two_io"); err != nil {
		t.Fatal(err)
	}
	if e := index(n, "diamond"); e.State != serving.StateReady {
		t.Fatalf("diamond after its step's load: %+v", e)
	}
	c := clientOf(t, n)
	res, err := c.Submit(ctx, "ens-diamond", mesh.Request{ContentType: wire.MediaTypeOIP,
		Body: []byte(`{"inputs":[{"name":"IN","datatype":"FP32","shape":[1,3],"data":[1,2,3]}]}`)})
	if err != nil || !strings.Contains(string(res.Body), `"data":[4,14,36]`) {
		t.Fatalf("diamond answered %s %v", res.Body, err)
	}
}

// seedRepo is the seed's image pipeline as a repository: an image as
// TYPE_STRING in, the image step (resize to 224x224), an ONNX model
// (image_mean: the channel means, [-1,3]), the topN step (top 2), its
// text out.
var seedRepo = map[string]string{
	"preprocess": `name: "preprocess" backend: "cluster_serving" max_batch_size: 8
input [ { name: "image" data_type: TYPE_STRING dims: [ 1 ] } ]
output [ { name: "tensor" data_type: TYPE_FP32 dims: [ 3, 224, 224 ] } ]
parameters { key: "step" value: { string_value: "image" } }
parameters { key: "imageResize" value: { string_value: "224,224" } }`,
	"postprocess": `name: "postprocess" backend: "cluster_serving" max_batch_size: 8
input [ { name: "scores" data_type: TYPE_FP32 dims: [ 3 ] } ]
output [ { name: "text" data_type: TYPE_STRING dims: [ 1 ] } ]
parameters { key: "step" value: { string_value: "topN" } }
parameters { key: "postProcessing" value: { string_value: "topN(2)" } }`,
	"classify": `name: "classify" platform: "ensemble" max_batch_size: 8
input [ { name: "IMAGE" data_type: TYPE_STRING dims: [ 1 ] } ]
output [ { name: "TOP" data_type: TYPE_STRING dims: [ 1 ] } ]
ensemble_scheduling { step [
  { model_name: "preprocess" input_map { key: "image" value: "IMAGE" } output_map { key: "tensor" value: "pixels" } },
  { model_name: "image_mean" input_map { key: "x" value: "pixels" } output_map { key: "y" value: "means" } },
  { model_name: "postprocess" input_map { key: "scores" value: "means" } output_map { key: "text" value: "TOP" } }
] }`,
}

// TestSeedImagePipeline serves the seed's image pipeline as an ordinary
// repository entry (the ensemble without its empty version directory, as
// git leaves it): a JPEG, base64 in OIP JSON's BYTES, comes back as
// the original's topN text, the same the Redis door's engine with
// imageResize and topN(2) writes for it.
func TestSeedImagePipeline(t *testing.T) {
	repo := t.TempDir()
	putModel(t, repo, "image_mean", "1", "model.onnx", "../../infer/testdata/image_mean.onnx")
	for name, cfg := range seedRepo {
		putEnsemble(t, repo, name, cfg)
	}
	// A git checkout of a Triton repository drops the ensemble's empty 1/.
	if err := os.Remove(filepath.Join(repo, "classify", "1")); err != nil {
		t.Fatal(err)
	}
	n := runReady(t, repoConfig(t, repo, "seed", 0))
	if e := index(n, "classify"); e.Version != "1" {
		t.Errorf("classify without a version directory: %+v, want version 1", e)
	}
	for _, e := range n.Repository().Index(false) {
		if e.State != serving.StateReady {
			t.Fatalf("%s: %s %s", e.Name, e.State, e.Reason)
		}
	}
	img, err := os.ReadFile("../../infer/testdata/fixtures/images/cat1.jpeg")
	if err != nil {
		t.Fatal(err)
	}
	c := clientOf(t, n)
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	body := `{"inputs":[{"name":"IMAGE","datatype":"BYTES","shape":[1,1],"data":["` + base64.StdEncoding.EncodeToString(img) + `"]}]}`
	res, err := c.Submit(ctx, "seed-classify", mesh.Request{ContentType: wire.MediaTypeOIP, Body: []byte(body)})
	if err != nil {
		t.Fatal(err)
	}
	engine := infertest.NewEngine(t, infer.Config{ModelPath: "../../infer/testdata/image_mean.onnx", ImageResize: [2]int{224, 224}, PostProcessing: "topN(2)"})
	want, err := wire.NewPredictor(engine, wire.Model{}).Predict(ctx, wire.MediaTypeRedisJSON,
		[]byte(`{"instances":[{"x":"`+base64.StdEncoding.EncodeToString(img)+`"}]}`))
	if err != nil {
		t.Fatal(err)
	}
	if len(want) < 10 || !strings.Contains(string(res.Body), `"data":["`+string(want)+`"]`) {
		t.Errorf("pipeline answered %s, want its text to be the Redis door's %s", res.Body, want)
	}
	t.Logf("%s", res.Body)
}

// clientOf is a client of n's NATS server, closed when the test ends.
func clientOf(t *testing.T, n *running) *mesh.Client {
	t.Helper()
	c, err := mesh.NewClient(n.Conn(), mesh.ClientConfig{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = c.Close() })
	return c
}

// TestEnsembleCarriesPriority: an ensemble request's priority reaches
// each step, placed in the step model's own levels: a request at
// priority 1 runs every step from two_io's level-1 queue, one without
// from its default level.
func TestEnsembleCarriesPriority(t *testing.T) {
	repo := t.TempDir()
	putModel(t, repo, "two_io", "1", "model.onnx", twoIOModel)
	levels := "max_batch_size: 8\ndynamic_batching { priority_levels: 2 default_priority_level: 2 }\n"
	if err := os.WriteFile(filepath.Join(repo, "two_io", "config.pbtxt"), []byte(levels), 0o644); err != nil {
		t.Fatal(err)
	}
	putEnsemble(t, repo, "diamond", diamondConfig)
	n := runReady(t, repoConfig(t, repo, "ens", 0))
	c := clientOf(t, n)
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	body := []byte(`{"inputs":[{"name":"IN","datatype":"FP32","shape":[1,3],"data":[1,2,3]}]}`)
	// What a door sets for an ensemble's request (door.ScheduleOf).
	for _, s := range []mesh.Schedule{{Priority: 1}, {}} {
		if _, err := c.Submit(ctx, "ens-diamond", mesh.Request{ContentType: wire.MediaTypeOIP, Body: body, Schedule: s}); err != nil {
			t.Fatal(err)
		}
	}
	js, err := jetstream.New(n.Conn())
	if err != nil {
		t.Fatal(err)
	}
	for name, want := range map[string]uint64{mesh.LevelConsumer(1): 4, mesh.WorkersConsumer: 4} {
		cons, err := js.Consumer(ctx, mesh.StreamName("ens-two_io"), name)
		if err != nil {
			t.Fatal(err)
		}
		info, err := cons.Info(ctx)
		if err != nil {
			t.Fatal(err)
		}
		if got := info.Delivered.Consumer; got != want {
			t.Errorf("two_io's %s delivered %d steps, want %d", name, got, want)
		}
	}
}
