package wire_test

import (
	"encoding/json"
	"fmt"
	"slices"
	"strings"
	"testing"

	"google.golang.org/protobuf/proto"

	"github.com/cluster-serving/cluster-serving/infer"
	"github.com/cluster-serving/cluster-serving/infer/status"
	"github.com/cluster-serving/cluster-serving/infer/wire"
	"github.com/cluster-serving/cluster-serving/infer/wire/kservepb"
)

// batchBody is a request of rows rows of add_f32's x (FP32 [-1,4]) in
// one codec's form.
type batchBody struct {
	codec     string
	mediaType string
	body      func(tb testing.TB, rows int) []byte
	// rowsOut reads the answer's rows (dim 0 of y).
	rowsOut func(tb testing.TB, answer []byte) int64
}

func rowsData(rows int) []float32 {
	d := make([]float32, rows*4)
	for i := range d {
		d[i] = float32(i)
	}
	return d
}

func batchBodies() []batchBody {
	oipRows := func(tb testing.TB, answer []byte) int64 {
		tb.Helper()
		var a struct {
			Outputs []struct {
				Shape []int64 `json:"shape"`
			} `json:"outputs"`
		}
		if err := json.Unmarshal(answer, &a); err != nil || len(a.Outputs) != 1 || len(a.Outputs[0].Shape) != 2 {
			tb.Fatalf("answer %s: %v", answer, err)
		}
		return a.Outputs[0].Shape[0]
	}
	grpcRows := func(tb testing.TB, answer []byte) int64 {
		tb.Helper()
		_, outs, _ := grpcOutputs(tb, answer)
		if len(outs) != 1 || len(outs[0].Shape) != 2 {
			tb.Fatalf("answer outputs %v", outs)
		}
		return outs[0].Shape[0]
	}
	grpcBody := func(raw bool) func(tb testing.TB, rows int) []byte {
		return func(tb testing.TB, rows int) []byte {
			tb.Helper()
			in := &inferInput{Name: "x", Datatype: "FP32", Shape: []int64{int64(rows), 4}}
			req := &kservepb.ModelInferRequest{ModelName: "m", Inputs: []*inferInput{in}}
			if raw {
				req.RawInputContents = [][]byte{wire.AppendRaw(nil, f32(in.Shape, rowsData(rows)...))}
			} else {
				in.Contents = &kservepb.InferTensorContents{Fp32Contents: rowsData(rows)}
			}
			b, err := proto.Marshal(req)
			if err != nil {
				tb.Fatal(err)
			}
			return b
		}
	}
	return []batchBody{
		{"OIP JSON", wire.MediaTypeOIP, func(tb testing.TB, rows int) []byte {
			data, _ := json.Marshal(rowsData(rows))
			return fmt.Appendf(nil, `{"inputs":[{"name":"x","datatype":"FP32","shape":[%d,4],"data":%s}]}`, rows, data)
		}, oipRows},
		{"OIP binary", wire.MediaTypeOIPBinary, func(tb testing.TB, rows int) []byte {
			raw := wire.AppendRaw(nil, f32([]int64{int64(rows), 4}, rowsData(rows)...))
			return binBody(fmt.Sprintf(`{"inputs":[{"name":"x","datatype":"FP32","shape":[%d,4],"parameters":{"binary_data_size":%d}}]}`, rows, len(raw)), raw)
		}, func(tb testing.TB, answer []byte) int64 {
			tb.Helper()
			header, _, err := wire.SplitOIPBinary(answer)
			if err != nil {
				tb.Fatal(err)
			}
			return oipRows(tb, header)
		}},
		{"KServe gRPC", wire.MediaTypeKServeGRPC, grpcBody(false), grpcRows},
		{"KServe gRPC raw", wire.MediaTypeKServeGRPC, grpcBody(true), grpcRows},
		{"JSON instances", wire.MediaTypeJSON, func(tb testing.TB, rows int) []byte {
			insts := make([]string, rows)
			for i := range insts {
				insts[i] = `{"x":[1,2,3,4]}`
			}
			return []byte(`{"instances":[` + strings.Join(insts, ",") + `]}`)
		}, func(tb testing.TB, answer []byte) int64 {
			tb.Helper()
			var a struct {
				Predictions []json.RawMessage `json:"predictions"`
			}
			if err := json.Unmarshal(answer, &a); err != nil {
				tb.Fatalf("answer %s: %v", answer, err)
			}
			return int64(len(a.Predictions))
		}},
	}
}

// TestBatchBound: on a model of max_batch_size 8 (add_f32 configured as
// a config.pbtxt configures it, see mesh/serving's withSettings), a
// request of 9 rows is a 400 that names the limit on every codec, with
// dynamic batching as without it; 8 rows answer 8.
func TestBatchBound(t *testing.T) {
	requireORT(t)
	configs := []struct {
		name string
		cfg  infer.Config
	}{
		{"dynamic_batching", infer.Config{ModelPath: model("add_f32"), MaxBatch: 8, MaxRequestBatch: 8, Batching: infer.BatchingOn, HoldIdle: true, PreferredBatch: []int{8}}},
		{"no dynamic_batching", infer.Config{ModelPath: model("add_f32"), MaxBatch: 8, MaxRequestBatch: 8, Batching: infer.BatchingOff}},
	}
	const want = `input "x": batch of 9 rows exceeds the model's max_batch_size 8`
	for _, c := range configs {
		p := newPredictor(t, c.cfg)
		if got := p.Spec().MaxBatch; got != 8 {
			t.Fatalf("%s: Spec().MaxBatch: got %d, want 8", c.name, got)
		}
		for _, b := range batchBodies() {
			t.Run(c.name+"/"+b.codec, func(t *testing.T) {
				_, err := p.Predict(t.Context(), b.mediaType, b.body(t, 9))
				if !isInputError(err) || status.Of(err) != status.BadInput || !strings.Contains(err.Error(), want) {
					t.Errorf("9 rows: got %v (status %d), want a 400 *InputError holding %q", err, status.Of(err), want)
				}
				answer, err := p.Predict(t.Context(), b.mediaType, b.body(t, 8))
				if err != nil {
					t.Fatalf("8 rows: got %v, want an answer", err)
				}
				if got := b.rowsOut(t, answer); got != 8 {
					t.Errorf("8 rows: got %d rows back, want 8", got)
				}
			})
		}
	}
}

// TestBatchBoundUnset: without a max_batch_size (no config.pbtxt), a
// request of any rows runs, as before.
func TestBatchBoundUnset(t *testing.T) {
	requireORT(t)
	p := newPredictor(t, infer.Config{ModelPath: model("add_f32"), MaxBatch: 8})
	for _, b := range batchBodies() {
		if !slices.Contains([]string{"OIP JSON", "KServe gRPC"}, b.codec) {
			continue
		}
		t.Run(b.codec, func(t *testing.T) {
			answer, err := p.Predict(t.Context(), b.mediaType, b.body(t, 20))
			if err != nil {
				t.Fatalf("20 rows: got %v, want an answer", err)
			}
			if got := b.rowsOut(t, answer); got != 20 {
				t.Errorf("20 rows: got %d rows back, want 20", got)
			}
		})
	}
}
