package pipeline_test

import (
	"context"
	"fmt"
	"sync/atomic"
	"testing"
	"time"

	"golang.org/x/sync/errgroup"

	"github.com/cluster-serving/cluster-serving/infer"
	"github.com/cluster-serving/cluster-serving/infer/modelconfig"
	"github.com/cluster-serving/cluster-serving/mesh"
	"github.com/cluster-serving/cluster-serving/mesh/pipeline"
)

// counting is a real mesh.Client that counts the step requests in flight
// at once (not a fake: every request goes to the real worker).
type counting struct {
	*mesh.Client
	now, peak atomic.Int64
}

func (c *counting) Submit(ctx context.Context, job string, req mesh.Request) (mesh.Result, error) {
	n := c.now.Add(1)
	for p := c.peak.Load(); n > p && !c.peak.CompareAndSwap(p, n); p = c.peak.Load() {
	}
	defer c.now.Add(-1)
	return c.Client.Submit(ctx, job, req)
}

const twoIOConfig = `name: "two_io" max_batch_size: 16
input [ { name: "a" data_type: TYPE_FP32 dims: [ 3 ] }, { name: "b" data_type: TYPE_FP32 dims: [ 3 ] } ]
output [ { name: "sum" data_type: TYPE_FP32 dims: [ 3 ] }, { name: "prod" data_type: TYPE_FP32 dims: [ 3 ] } ]`

// TestMaxInflightRequests runs 32 concurrent requests through a
// two-step chain with max_inflight_requests 2: never more than 2 requests
// of a step are in flight (4 over both steps), and every answer is right.
func TestMaxInflightRequests(t *testing.T) {
	client := serveDiamond(t)
	member, _, err := modelconfig.Parse([]byte(twoIOConfig))
	if err != nil {
		t.Fatal(err)
	}
	cfg, _, err := modelconfig.Parse([]byte(`name: "chain" platform: "ensemble" max_batch_size: 8
input [ { name: "IN" data_type: TYPE_FP32 dims: [ 3 ] } ]
output [ { name: "OUT" data_type: TYPE_FP32 dims: [ 3 ] } ]
ensemble_scheduling { max_inflight_requests: 2 step [
  { model_name: "two_io" input_map { key: "a" value: "IN" } input_map { key: "b" value: "IN" } output_map { key: "sum" value: "S" } },
  { model_name: "two_io" input_map { key: "a" value: "S" } input_map { key: "b" value: "IN" } output_map { key: "prod" value: "OUT" } }
] }`))
	if err != nil {
		t.Fatal(err)
	}
	g, err := pipeline.Build("chain", cfg, func(string, int64) (pipeline.Member, error) {
		return pipeline.Member{Name: "two_io", Version: "1", Job: "p-two_io", Config: member}, nil
	})
	if err != nil {
		t.Fatal(err)
	}
	c := &counting{Client: client}
	p := pipeline.New(g, c)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	var eg errgroup.Group
	for i := range 32 {
		eg.Go(func() error {
			x := float32(i)
			in := infer.Tensor{DType: infer.Float32, Shape: []int64{1, 3}, Data: []float32{x, x + 1, -x}}
			out, err := p.Infer(ctx, [][]infer.Tensor{{in}})
			if err != nil {
				return err
			}
			got := out[0][0].Data.([]float32)
			// OUT = (IN+IN)*IN = 2x².
			for j, v := range in.Data.([]float32) {
				if got[j] != 2*v*v {
					return fmt.Errorf("request %d: got %v, want 2x² of %v", i, got, in.Data)
				}
			}
			return nil
		})
	}
	if err := eg.Wait(); err != nil {
		t.Fatal(err)
	}
	if peak := c.peak.Load(); peak > 4 || peak < 2 {
		t.Errorf("peak step requests in flight: %d, want 2 to 4 (2 per step)", peak)
	}
	t.Logf("peak in flight over both steps: %d", c.peak.Load())
}
