package grpcdoor_test

import (
	"context"
	"errors"
	"fmt"
	"io"
	"slices"
	"strings"
	"sync"
	"testing"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	grpcdoor "github.com/cluster-serving/cluster-serving/bridge/grpcdoor"
	"github.com/cluster-serving/cluster-serving/infer"
	"github.com/cluster-serving/cluster-serving/infer/infertest"
	"github.com/cluster-serving/cluster-serving/infer/wire"
	"github.com/cluster-serving/cluster-serving/infer/wire/kservepb"
	"github.com/cluster-serving/cluster-serving/mesh"
	"github.com/cluster-serving/cluster-serving/mesh/meshtest"
)

// addRequest asks model (the add model, y = 2x + 1) for x = base,
// base+1, base+2, base+3, under id.
func addRequest(model, id string, base float32) *kservepb.ModelInferRequest {
	return &kservepb.ModelInferRequest{ModelName: model, Id: id, Inputs: []*inferInput{{Name: "x", Datatype: "FP32", Shape: []int64{1, 4},
		Contents: &kservepb.InferTensorContents{Fp32Contents: []float32{base, base + 1, base + 2, base + 3}}}}}
}

// streamCase is one request of a stream and what its answer must be:
// y for a good one, else an error_message holding want.
type streamCase struct {
	req  *kservepb.ModelInferRequest
	y    []float32
	want string
}

// streamCases are n requests to add interleaving good ones, ones to an
// unknown model and ones with a bad tensor, ids "r0" to "r<n-1>".
func streamCases(n int) []streamCase {
	out := make([]streamCase, n)
	for i := range out {
		id, x := fmt.Sprintf("r%d", i), float32(i)
		switch i % 3 {
		case 0:
			out[i] = streamCase{req: addRequest("add", id, x), y: []float32{2*x + 1, 2*x + 3, 2*x + 5, 2*x + 7}}
		case 1:
			out[i] = streamCase{req: addRequest("nope", id, x), want: `unknown model "nope"`}
		case 2:
			bad := addRequest("add", id, x)
			bad.Inputs[0].Shape = []int64{2, 4}
			out[i] = streamCase{req: bad, want: "contents.fp32_contents holds 4 elements, FP32 of shape [2 4] needs 8"}
		}
	}
	return out
}

// check reports how the answer of a stream differs from tc's.
func (tc streamCase) check(got *kservepb.ModelStreamInferResponse) error {
	r := got.InferResponse
	switch {
	case r.GetId() != tc.req.Id:
		return fmt.Errorf("id %q, want %q", r.GetId(), tc.req.Id)
	case tc.want != "" && !strings.Contains(got.ErrorMessage, tc.want):
		return fmt.Errorf("error_message %q, want one with %q", got.ErrorMessage, tc.want)
	case tc.want == "" && got.ErrorMessage != "":
		return fmt.Errorf("error_message %q, want none", got.ErrorMessage)
	case tc.want == "" && (len(r.Outputs) != 1 || !slices.Equal(r.Outputs[0].Contents.GetFp32Contents(), tc.y)):
		return fmt.Errorf("outputs %v, want y %v", r.Outputs, tc.y)
	}
	return nil
}

// TestStreamInfer: 20 requests sent at once on one stream, good ones
// between requests to an unknown model and ones with a bad tensor, get
// 20 answers in their order, ids echoed, the failures in band; then the
// client half-closes and the stream ends with OK.
func TestStreamInfer(t *testing.T) {
	addr := startDoor(t, grpcdoor.Config{}, served{name: "add", file: "add_f32"})
	stream, err := inferClient(t, addr).ModelStreamInfer(callCtx(t))
	if err != nil {
		t.Fatal(err)
	}
	cases := streamCases(20)
	for _, tc := range cases {
		if err := stream.Send(tc.req); err != nil {
			t.Fatalf("send %s: %v", tc.req.Id, err)
		}
	}
	if err := stream.CloseSend(); err != nil {
		t.Fatal(err)
	}
	for _, tc := range cases {
		got, err := stream.Recv()
		if err != nil {
			t.Fatalf("answer to %s: %v", tc.req.Id, err)
		}
		if err := tc.check(got); err != nil {
			t.Errorf("answer to %s: %v", tc.req.Id, err)
		}
	}
	if got, err := stream.Recv(); !errors.Is(err, io.EOF) {
		t.Errorf("after the answers: got %v %v, want the stream ended with OK (io.EOF)", got, err)
	}
}

// TestStreamInferInteractive: one request at a time, the stream stays
// usable after each failure, and one more request sent right before the
// half-close is still answered.
func TestStreamInferInteractive(t *testing.T) {
	addr := startDoor(t, grpcdoor.Config{}, served{name: "add", file: "add_f32"})
	stream, err := inferClient(t, addr).ModelStreamInfer(callCtx(t))
	if err != nil {
		t.Fatal(err)
	}
	malformed := &kservepb.ModelInferRequest{ModelName: "add", Id: "m", Inputs: []*inferInput{{Name: "x", Datatype: "FP32", Shape: []int64{1, 4}}},
		RawInputContents: [][]byte{make([]byte, 15)}}
	cases := append(streamCases(6), streamCase{req: malformed, want: "raw data has 15 bytes"})
	cases = append(cases, streamCase{req: addRequest("add", "last", 1), y: []float32{3, 5, 7, 9}})
	for _, tc := range cases[:len(cases)-1] {
		if err := stream.Send(tc.req); err != nil {
			t.Fatalf("send %s: %v", tc.req.Id, err)
		}
		got, err := stream.Recv()
		if err != nil {
			t.Fatalf("answer to %s: %v", tc.req.Id, err)
		}
		if err := tc.check(got); err != nil {
			t.Errorf("answer to %s: %v", tc.req.Id, err)
		}
	}
	last := cases[len(cases)-1]
	if err := stream.Send(last.req); err != nil {
		t.Fatal(err)
	}
	if err := stream.CloseSend(); err != nil {
		t.Fatal(err)
	}
	got, err := stream.Recv()
	if err != nil {
		t.Fatalf("answer to the request before the half-close: %v", err)
	}
	if err := last.check(got); err != nil {
		t.Errorf("answer to the request before the half-close: %v", err)
	}
	if _, err := stream.Recv(); !errors.Is(err, io.EOF) {
		t.Errorf("after the half-close: got %v, want io.EOF", err)
	}
}

// TestStreamInferTooLarge: a message over MaxRecvBytes ends the stream
// with ResourceExhausted, as a unary call gets it, after the answers
// already sent.
func TestStreamInferTooLarge(t *testing.T) {
	addr := startDoor(t, grpcdoor.Config{MaxRecvBytes: 4096}, served{name: "add", file: "add_f32"})
	stream, err := inferClient(t, addr).ModelStreamInfer(callCtx(t))
	if err != nil {
		t.Fatal(err)
	}
	if err := stream.Send(addRequest("add", "small", 1)); err != nil {
		t.Fatal(err)
	}
	if got, err := stream.Recv(); err != nil || got.ErrorMessage != "" || got.InferResponse.GetId() != "small" {
		t.Fatalf("small: got %v %v, want its answer", got, err)
	}
	big := &kservepb.ModelInferRequest{ModelName: "add", Id: "big", Inputs: []*inferInput{{Name: "x", Datatype: "FP32", Shape: []int64{1024, 4}}},
		RawInputContents: [][]byte{make([]byte, 16384)}}
	_ = stream.Send(big) // the server may end the stream before the send returns
	if got, err := stream.Recv(); status.Code(err) != codes.ResourceExhausted {
		t.Errorf("big: got %v %v, want the stream ended with ResourceExhausted", got, err)
	}
}

// streamOnce sends req on a new stream of c, half-closes, and returns
// its one answer, or the stream's error.
func streamOnce(ctx context.Context, c kservepb.GRPCInferenceServiceClient, req *kservepb.ModelInferRequest, opts ...grpc.CallOption) (*kservepb.ModelStreamInferResponse, error) {
	stream, err := c.ModelStreamInfer(ctx, opts...)
	if err != nil {
		return nil, err
	}
	if err := stream.Send(req); err != nil && !errors.Is(err, io.EOF) {
		return nil, err
	}
	if err := stream.CloseSend(); err != nil {
		return nil, err
	}
	return stream.Recv()
}

// gate is the add model's predictor holding every Predict call until
// release is closed; it counts the calls in Predict now and at most.
type gate struct {
	next         mesh.Predictor
	release      chan struct{}
	mu           sync.Mutex
	inside, peak int
}

func (g *gate) Predict(ctx context.Context, contentType string, body []byte) ([]byte, error) {
	g.mu.Lock()
	g.inside++
	g.peak = max(g.peak, g.inside)
	g.mu.Unlock()
	defer func() { g.mu.Lock(); g.inside--; g.mu.Unlock() }()
	select {
	case <-g.release:
	case <-ctx.Done():
		return nil, ctx.Err()
	}
	return g.next.Predict(ctx, contentType, body)
}

func (g *gate) counts() (inside, peak int) {
	g.mu.Lock()
	defer g.mu.Unlock()
	return g.inside, g.peak
}

// TestStreamInferConcurrent: the requests of one stream are served at
// once, StreamWindow of them and no more: with 40 sent and the model
// holding each, StreamWindow reach it together (a stream served one at
// a time would never get there); once released, all 40 are answered in
// their order.
func TestStreamInferConcurrent(t *testing.T) {
	infertest.RequireLibrary(t)
	e := infertest.NewEngine(t, infer.Config{ModelPath: infertest.Model("add_f32"), MaxBatch: 8})
	g := &gate{next: wire.NewPredictor(e, wire.Model{Name: "add"}), release: make(chan struct{})}
	addr := startDoor(t, grpcdoor.Config{}, served{name: "add", predictor: g, info: e.Info()})
	stream, err := inferClient(t, addr).ModelStreamInfer(callCtx(t))
	if err != nil {
		t.Fatal(err)
	}
	const n = 40
	for i := range n {
		if err := stream.Send(addRequest("add", fmt.Sprintf("r%d", i), float32(i))); err != nil {
			t.Fatalf("send r%d: %v", i, err)
		}
	}
	meshtest.WaitFor(t, "StreamWindow requests in the model at once", func() bool { inside, _ := g.counts(); return inside >= grpcdoor.StreamWindow })
	close(g.release)
	for i := range n {
		got, err := stream.Recv()
		x := float32(i)
		if err == nil {
			err = streamCase{req: addRequest("add", fmt.Sprintf("r%d", i), x), y: []float32{2*x + 1, 2*x + 3, 2*x + 5, 2*x + 7}}.check(got)
		}
		if err != nil {
			t.Fatalf("answer %d: %v", i, err)
		}
	}
	if _, peak := g.counts(); peak != grpcdoor.StreamWindow {
		t.Errorf("requests in the model at once: got %d at most, want StreamWindow (%d)", peak, grpcdoor.StreamWindow)
	}
}
