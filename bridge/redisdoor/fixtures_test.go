package redisdoor_test

import (
	"bytes"
	"encoding/base64"
	"fmt"
	"math"
	"strings"
	"testing"

	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/ipc"

	"github.com/cluster-serving/cluster-serving/bridge/redisdoor/redistest"
	"github.com/cluster-serving/cluster-serving/infer/infertest"
	"github.com/cluster-serving/cluster-serving/infer/wire"
	"github.com/cluster-serving/cluster-serving/mesh/meshtest"
)

// pyTensor is one output as the Python client reads a result: column 0 is
// the flat data, the non-null non-zero entries of column 1 the shape.
type pyTensor struct {
	data  []float32
	shape []int32
}

// readLikePython decodes a result value the way OutputQueue does.
func readLikePython(tb testing.TB, value string) []pyTensor {
	tb.Helper()
	raw, err := base64.StdEncoding.DecodeString(value)
	if err != nil {
		tb.Fatalf("result %.40q is not base64: %v", value, err)
	}
	r, err := ipc.NewReader(bytes.NewReader(raw))
	if err != nil {
		tb.Fatalf("result is not an Arrow stream: %v", err)
	}
	defer r.Release()
	var out []pyTensor
	for r.Next() {
		rec := r.RecordBatch()
		data := rec.Column(0).(*array.Float32)
		shape := rec.Column(1).(*array.Int32)
		var t pyTensor
		for i := range data.Len() {
			if data.IsValid(i) {
				t.data = append(t.data, data.Value(i))
			}
		}
		for i := range shape.Len() {
			if shape.IsValid(i) && shape.Value(i) != 0 {
				t.shape = append(t.shape, shape.Value(i))
			}
		}
		out = append(out, t)
	}
	return out
}

// TestPyarrowFixturesThroughTheDoor XADDs each real pyarrow payload as the
// Python client does (uri, data = base64 Arrow) and checks the result, read
// as the client reads it, against ONNX Runtime run directly on the payload.
func TestPyarrowFixturesThroughTheDoor(t *testing.T) {
	s := meshtest.StartServer(t)
	addr, rdb := redistest.Start(t)
	for i, c := range []struct{ file, model string }{
		{"ndarray-128-base64", "add_f32_128"},          // dense tensor, old framing
		{"arrowBytes", "sparse_rows"},                  // sparse tensor, old framing
		{"image-3_224_224-arrow-base64", "image_mean"}, // base64 JPEG, modern framing
	} {
		t.Run(c.file, func(t *testing.T) {
			data := strings.TrimSpace(string(infertest.Fixture(t, "payloads/"+c.file)))
			model := infertest.Model(c.model)
			job := fmt.Sprintf("fixture%d", i)
			m := startJob(t, s, job, model)
			runDoor(t, addr, job, m.client)
			enqueue(t, rdb, job, "rec", data, false)
			got := readLikePython(t, query(t, rdb, job, "rec"))

			direct := infertest.NewSession(t, model)
			in, err := wire.DecodeRedisArrow([]byte(data), direct.Info(), false)
			if err != nil {
				t.Fatal(err)
			}
			for j := range in {
				in[j].Shape = append([]int64{1}, in[j].Shape...)
			}
			want, err := direct.Run(in)
			if err != nil {
				t.Fatal(err)
			}
			if len(got) != len(want) {
				t.Fatalf("got %d output tensors, want %d", len(got), len(want))
			}
			for k, w := range want {
				wd := w.Data.([]float32)
				if fmt.Sprint(got[k].shape) != fmt.Sprint(w.Shape[1:]) {
					t.Errorf("output %d: got shape %v, want %v", k, got[k].shape, w.Shape[1:])
				}
				if len(got[k].data) != len(wd) {
					t.Fatalf("output %d: got %d values, want %d", k, len(got[k].data), len(wd))
				}
				for n := range wd {
					if math.Abs(float64(got[k].data[n]-wd[n])) > 1e-6*math.Max(1, math.Abs(float64(wd[n]))) {
						t.Fatalf("output %d value %d: got %v, want %v (ONNX Runtime direct)", k, n, got[k].data[n], wd[n])
					}
				}
			}
		})
	}
}
