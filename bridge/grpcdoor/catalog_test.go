package grpcdoor_test

import (
	"context"
	"errors"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/cluster-serving/cluster-serving/bridge/door"
	grpcdoor "github.com/cluster-serving/cluster-serving/bridge/grpcdoor"
	"github.com/cluster-serving/cluster-serving/infer"
	"github.com/cluster-serving/cluster-serving/infer/infertest"
	wstatus "github.com/cluster-serving/cluster-serving/infer/status"
	"github.com/cluster-serving/cluster-serving/infer/wire/kservepb"
)

// catalog is a Catalog whose models a test changes while the door runs,
// as a model repository does.
type catalog struct {
	mu     sync.Mutex
	models []door.Model
	index  []door.ModelState
}

func (c *catalog) Models() []door.Model {
	c.mu.Lock()
	defer c.mu.Unlock()
	return append([]door.Model(nil), c.models...)
}

func (c *catalog) Index(bool) []door.ModelState {
	c.mu.Lock()
	defer c.mu.Unlock()
	return append([]door.ModelState(nil), c.index...)
}

func (c *catalog) set(models []door.Model, index []door.ModelState) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.models, c.index = models, index
}

// TestCatalog: with a Catalog the door looks its models up at every call:
// a model it lists later serves, one it drops is NotFound with the
// index's reason; Config.Models is ignored.
func TestCatalog(t *testing.T) {
	infertest.RequireLibrary(t)
	info := infertest.NewEngine(t, infer.Config{ModelPath: infertest.Model("add_f32")}).Info()
	cat := &catalog{}
	cat.set(nil, []door.ModelState{{Name: "add", Version: "1", State: "UNAVAILABLE", Reason: "not loaded yet"}})
	// startDoor serves the job "add" and lists it in Config.Models, which
	// the Catalog overrides.
	addr := startDoor(t, grpcdoor.Config{Catalog: cat}, served{name: "add", file: "add_f32"})
	c, ctx := inferClient(t, addr), callCtx(t)
	req := &kservepb.ModelInferRequest{ModelName: "add", Inputs: []*inferInput{
		{Name: "x", Datatype: "FP32", Shape: []int64{1, 4}, Contents: &kservepb.InferTensorContents{Fp32Contents: []float32{1, 2, 3, 4}}}}}
	notFound := func(want string) {
		t.Helper()
		_, e1 := c.ModelInfer(ctx, req)
		_, e2 := c.ModelMetadata(ctx, &kservepb.ModelMetadataRequest{Name: "add"})
		_, e3 := c.ModelConfig(ctx, &kservepb.ModelConfigRequest{Name: "add"})
		for _, err := range []error{e1, e2, e3} {
			if status.Code(err) != codes.NotFound || !strings.Contains(status.Convert(err).Message(), want) {
				t.Errorf("got %v, want NotFound with %q", err, want)
			}
		}
		if r, err := c.ModelReady(ctx, &kservepb.ModelReadyRequest{Name: "add"}); err != nil || r.Ready {
			t.Errorf("ModelReady: got %v %v, want not ready", r, err)
		}
	}
	notFound(`model "add" is not loaded (unavailable: not loaded yet)`)

	cat.set([]door.Model{{Name: "add", Job: "add", Info: info}}, []door.ModelState{{Name: "add", Version: "1", State: "READY"}})
	resp, err := c.ModelInfer(ctx, req)
	if err != nil || resp.ModelVersion != "1" || len(resp.Outputs) != 1 {
		t.Fatalf("listed: got %v %v, want an answer from version 1", resp, err)
	}
	if md, err := c.ModelMetadata(ctx, &kservepb.ModelMetadataRequest{Name: "add"}); err != nil || len(md.Versions) != 1 || md.Versions[0] != "1" {
		t.Errorf("ModelMetadata: got %v %v, want versions [1]", md, err)
	}

	cat.set(nil, []door.ModelState{{Name: "add", Version: "1", State: "UNAVAILABLE", Reason: "unloaded"}})
	notFound(`model "add" is not loaded (unavailable: unloaded)`)
	cat.set(nil, nil)
	notFound(`unknown model "add"`)
}

func TestCatalogValidate(t *testing.T) {
	if err := (grpcdoor.Config{Config: door.Config{Addr: "127.0.0.1:0"}, Catalog: &catalog{}}).Validate(); err != nil {
		t.Errorf("Catalog without Models: got %v, want valid", err)
	}
	if err := (grpcdoor.Config{Config: door.Config{Addr: "127.0.0.1:0"}}).Validate(); err == nil || !strings.Contains(err.Error(), "Models is empty") {
		t.Errorf("neither: got %v, want an error naming Models", err)
	}
}

// controlled is a catalog that is a door.Control, as a model repository
// is: Load lists a model of disk (its job served by the test's mesh),
// Unload drops it; a model of broken fails to load with its reason.
// With refuse, both answer 403 as a repository outside modelControl
// explicit does; with stopped, a plain error, as a node not running.
type controlled struct {
	catalog
	disk    map[string]door.Model
	broken  map[string]string
	refuse  atomic.Bool
	stopped atomic.Bool
}

func (c *controlled) Load(_ context.Context, name string) error {
	if err := c.refused(name); err != nil {
		return err
	}
	if why, ok := c.broken[name]; ok {
		return wstatus.Errorf(wstatus.BadInput, "load model %q: %s", name, why)
	}
	m, ok := c.disk[name]
	if !ok {
		return wstatus.Errorf(wstatus.NotFound, "unknown model %q", name)
	}
	models := slices.DeleteFunc(c.Models(), func(o door.Model) bool { return o.Name == name })
	c.set(append(models, m), c.indexWith(name, "READY", ""))
	return nil
}

func (c *controlled) Unload(_ context.Context, name string) error {
	if err := c.refused(name); err != nil {
		return err
	}
	models := c.Models()
	n := len(models)
	if models = slices.DeleteFunc(models, func(o door.Model) bool { return o.Name == name }); len(models) == n {
		return wstatus.Errorf(wstatus.NotFound, "model %q is not loaded", name)
	}
	c.set(models, c.indexWith(name, "UNAVAILABLE", "unloaded"))
	return nil
}

func (c *controlled) refused(name string) error {
	switch {
	case c.refuse.Load():
		return wstatus.Errorf(403, "model %q: modelControl poll: load and unload need modelControl explicit", name)
	case c.stopped.Load():
		return errors.New("repository: not running")
	}
	return nil
}

// indexWith is the index with name's entry set to state and reason.
func (c *controlled) indexWith(name, state, reason string) []door.ModelState {
	index := c.Index(false)
	for i := range index {
		if index[i].Name == name {
			index[i].State, index[i].Reason = state, reason
		}
	}
	return index
}

// Index with ready lists only the READY models, as a repository does.
func (c *controlled) Index(ready bool) []door.ModelState {
	index := c.catalog.Index(false)
	if ready {
		index = slices.DeleteFunc(index, func(m door.ModelState) bool { return m.State != "READY" })
	}
	return index
}

// startRepository runs the door on a controlled catalog holding add
// (loaded) and other (on disk, not loaded), both served by the mesh, and
// broken, which fails to load.
func startRepository(t *testing.T) (kservepb.GRPCInferenceServiceClient, *controlled) {
	t.Helper()
	infertest.RequireLibrary(t)
	info := infertest.NewEngine(t, infer.Config{ModelPath: infertest.Model("add_f32")}).Info()
	add, other := door.Model{Name: "add", Job: "add", Info: info}, door.Model{Name: "other", Job: "other", Info: info}
	cat := &controlled{disk: map[string]door.Model{"add": add, "other": other}, broken: map[string]string{"broken": "graph: no input"}}
	cat.set([]door.Model{add}, []door.ModelState{{Name: "add", Version: "1", State: "READY"},
		{Name: "other", Version: "1", State: "UNAVAILABLE", Reason: "not loaded yet"}, {Name: "broken", Version: "1", State: "UNAVAILABLE", Reason: "graph: no input"}})
	addr := startDoor(t, grpcdoor.Config{Catalog: cat}, served{name: "add", file: "add_f32"}, served{name: "other", file: "add_f32"})
	return inferClient(t, addr), cat
}

// TestRepository drives the repository RPCs over gRPC, as
// cmd/cluster-serving's TestHTTPModelRepository does the HTTP routes:
// index (ready filter), load of a model on disk that then serves, bad
// requests, unknown and broken models, unload, and the errors of a
// repository that refuses control or does not run.
func TestRepository(t *testing.T) {
	c, cat := startRepository(t)
	ctx := callCtx(t)
	r, err := c.ServerMetadata(ctx, &kservepb.ServerMetadataRequest{})
	if err != nil || !slices.Equal(r.Extensions, door.Extensions(true)) || r.Extensions[0] != "model_repository" {
		t.Errorf("ServerMetadata: got %v %v, want extensions %v", r, err, door.Extensions(true))
	}
	index := func(ready bool) string {
		t.Helper()
		r, err := c.RepositoryIndex(ctx, &kservepb.RepositoryIndexRequest{Ready: ready})
		if err != nil {
			t.Fatalf("RepositoryIndex: %v", err)
		}
		var out []string
		for _, m := range r.Models {
			out = append(out, m.Name+" "+m.Version+" "+m.State+" "+m.Reason)
		}
		return strings.Join(out, "; ")
	}
	if got, want := index(false), "add 1 READY ; other 1 UNAVAILABLE not loaded yet; broken 1 UNAVAILABLE graph: no input"; got != want {
		t.Errorf("RepositoryIndex: got %q, want %q", got, want)
	}
	if got, want := index(true), "add 1 READY "; got != want {
		t.Errorf("RepositoryIndex ready: got %q, want %q", got, want)
	}
	load := func(name string, params map[string]*kservepb.ModelRepositoryParameter) error {
		_, err := c.RepositoryModelLoad(ctx, &kservepb.RepositoryModelLoadRequest{ModelName: name, Parameters: params})
		return err
	}
	unload := func(name string, params map[string]*kservepb.ModelRepositoryParameter) error {
		_, err := c.RepositoryModelUnload(ctx, &kservepb.RepositoryModelUnloadRequest{ModelName: name, Parameters: params})
		return err
	}
	str := func(v string) *kservepb.ModelRepositoryParameter {
		return &kservepb.ModelRepositoryParameter{ParameterChoice: &kservepb.ModelRepositoryParameter_StringParam{StringParam: v}}
	}
	no := &kservepb.ModelRepositoryParameter{ParameterChoice: &kservepb.ModelRepositoryParameter_BoolParam{}}
	_, indexErr := c.RepositoryIndex(ctx, &kservepb.RepositoryIndexRequest{RepositoryName: "x"})
	_, loadErr := c.RepositoryModelLoad(ctx, &kservepb.RepositoryModelLoadRequest{RepositoryName: "x", ModelName: "other"})
	for _, tc := range []struct {
		name string
		err  error
		code codes.Code
		want string
	}{
		{"index of a named repository", indexErr, codes.InvalidArgument, `unknown repository_name "x"`},
		{"load from a named repository", loadErr, codes.InvalidArgument, `unknown repository_name "x"`},
		{"infer before load", inferOther(ctx, c), codes.NotFound, `model "other" is not loaded (unavailable: not loaded yet)`},
		{"load with parameters", load("other", map[string]*kservepb.ModelRepositoryParameter{"config": str("{}"), "file:1/model.onnx": str("")}),
			codes.InvalidArgument, "unsupported parameters config, file:1/model.onnx"},
		{"load without a name", load("", nil), codes.InvalidArgument, "model_name is empty"},
		{"load unknown", load("nope", nil), codes.NotFound, `unknown model "nope"`},
		{"load broken", load("broken", nil), codes.InvalidArgument, `load model "broken": graph: no input`},
		{"load", load("other", nil), codes.OK, ""},
		{"infer after load", inferOther(ctx, c), codes.OK, ""},
		{"reload", load("other", nil), codes.OK, ""},
		{"unload with unload_dependents", unload("other", map[string]*kservepb.ModelRepositoryParameter{"unload_dependents": no}), codes.OK, ""},
		{"infer after unload", inferOther(ctx, c), codes.NotFound, `model "other" is not loaded (unavailable: unloaded)`},
		{"unload again", unload("other", nil), codes.NotFound, `model "other" is not loaded`},
		{"unload with parameters", unload("add", map[string]*kservepb.ModelRepositoryParameter{"config": str("{}")}), codes.InvalidArgument, "unsupported parameters config"},
	} {
		if status.Code(tc.err) != tc.code || !strings.Contains(status.Convert(tc.err).Message(), tc.want) {
			t.Errorf("%s: got %v, want %v with %q", tc.name, tc.err, tc.code, tc.want)
		}
	}
	if r, err := c.ModelReady(ctx, &kservepb.ModelReadyRequest{Name: "other"}); err != nil || r.Ready {
		t.Errorf("ModelReady other after unload: got %v %v, want not ready", r, err)
	}
	cat.refuse.Store(true)
	if err := load("other", nil); status.Code(err) != codes.PermissionDenied || !strings.Contains(err.Error(), "modelControl explicit") {
		t.Errorf("load refused by the control mode: got %v, want PermissionDenied naming modelControl explicit", err)
	}
	cat.refuse.Store(false)
	cat.stopped.Store(true)
	if err := unload("add", nil); status.Code(err) != codes.Unavailable || !strings.Contains(err.Error(), `unload model "add": repository: not running`) {
		t.Errorf("unload while the repository does not run: got %v, want Unavailable naming the model", err)
	}
}

// inferOther is the error of a ModelInfer of other (nil when it answers
// y = 2x + 1).
func inferOther(ctx context.Context, c kservepb.GRPCInferenceServiceClient) error {
	resp, err := c.ModelInfer(ctx, addRequest("other", "", 1))
	if err == nil && !slices.Equal(resp.Outputs[0].Contents.GetFp32Contents(), []float32{3, 5, 7, 9}) {
		return errors.New("other answered " + resp.String())
	}
	return err
}

// TestRepositoryWithoutControl: without a Catalog the repository RPCs
// answer Unimplemented; with a Catalog that cannot load and unload, the
// index answers and load and unload do not, and ServerMetadata leaves
// model_repository out.
func TestRepositoryWithoutControl(t *testing.T) {
	plain := inferClient(t, startDoor(t, grpcdoor.Config{}, served{name: "add", file: "add_f32"}))
	cat := &catalog{}
	cat.set(nil, []door.ModelState{{Name: "add", Version: "1", State: "UNAVAILABLE", Reason: "not loaded yet"}})
	listed := inferClient(t, startDoor(t, grpcdoor.Config{Catalog: cat}, served{name: "add", file: "add_f32"}))
	ctx := callCtx(t)
	const want = "this server has no model repository"
	for name, c := range map[string]kservepb.GRPCInferenceServiceClient{"no catalog": plain, "catalog": listed} {
		_, lerr := c.RepositoryModelLoad(ctx, &kservepb.RepositoryModelLoadRequest{ModelName: "add"})
		_, uerr := c.RepositoryModelUnload(ctx, &kservepb.RepositoryModelUnloadRequest{ModelName: "add"})
		for _, err := range []error{lerr, uerr} {
			if status.Code(err) != codes.Unimplemented || !strings.Contains(err.Error(), want) {
				t.Errorf("%s: load/unload: got %v, want Unimplemented with %q", name, err, want)
			}
		}
		if r, err := c.ServerMetadata(ctx, &kservepb.ServerMetadataRequest{}); err != nil || !slices.Equal(r.Extensions, door.Extensions(false)) {
			t.Errorf("%s: ServerMetadata: got %v %v, want extensions %v", name, r, err, door.Extensions(false))
		}
	}
	if _, err := plain.RepositoryIndex(ctx, &kservepb.RepositoryIndexRequest{}); status.Code(err) != codes.Unimplemented {
		t.Errorf("no catalog: RepositoryIndex: got %v, want Unimplemented", err)
	}
	if r, err := listed.RepositoryIndex(ctx, &kservepb.RepositoryIndexRequest{}); err != nil || len(r.Models) != 1 || r.Models[0].Reason != "not loaded yet" {
		t.Errorf("catalog: RepositoryIndex: got %v %v, want add, not loaded yet", r, err)
	}
}
