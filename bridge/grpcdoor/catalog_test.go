package grpcdoor_test

import (
	"strings"
	"sync"
	"testing"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/cluster-serving/cluster-serving/bridge/door"
	grpcdoor "github.com/cluster-serving/cluster-serving/bridge/grpcdoor"
	"github.com/cluster-serving/cluster-serving/infer"
	"github.com/cluster-serving/cluster-serving/infer/infertest"
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
