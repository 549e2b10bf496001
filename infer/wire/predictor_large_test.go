package wire_test

import (
	"context"
	"encoding/json"
	"fmt"
	"reflect"
	"testing"

	"github.com/cluster-serving/cluster-serving/infer"
	"github.com/cluster-serving/cluster-serving/infer/infertest"
	"github.com/cluster-serving/cluster-serving/infer/wire"
)

// TestPredictOIPLargerThanQueue sends one OIP request of 3,000 rows, more
// than the engine's queue holds (1,024 by default, 100 here), to a model
// that batches at most 32 rows: it is served in chunks, and its answer is
// the rows' answers, in order, as each row alone gets them.
func TestPredictOIPLargerThanQueue(t *testing.T) {
	const rows = 3000
	e := newEngine(t, infer.Config{ModelPath: model("add_f32"), MaxBatch: 32, QueueSize: 100, Parallelism: 2})
	p := wire.NewPredictor(e, wire.Model{Name: "m"})
	x := make([]float32, rows*4)
	for i := range x {
		x[i] = float32(i%1000) / 8
	}
	data, _ := json.Marshal(x)
	body := fmt.Sprintf(`{"inputs":[{"name":"x","datatype":"FP32","shape":[%d,4],"data":%s}]}`, rows, data)
	answer, err := p.Predict(context.Background(), wire.MediaTypeOIP, []byte(body))
	if err != nil {
		t.Fatalf("Predict: %v", err)
	}
	var resp infertest.OIPResponse
	if err := json.Unmarshal(answer, &resp); err != nil {
		t.Fatal(err)
	}
	var got []float32
	if err := json.Unmarshal(resp.Outputs[0].Data, &got); err != nil {
		t.Fatal(err)
	}
	if shape := resp.Outputs[0].Shape; !reflect.DeepEqual(shape, []int64{rows, 4}) {
		t.Fatalf("got shape %v, want [%d 4]", shape, rows)
	}
	for r := range rows {
		row := infer.Tensor{DType: infer.Float32, Shape: []int64{4}, Data: x[r*4 : r*4+4]}
		one, err := e.Infer(context.Background(), [][]infer.Tensor{{row}})
		if err != nil {
			t.Fatalf("row %d alone: %v", r, err)
		}
		if want := one[0][0].Data.([]float32); !reflect.DeepEqual(got[r*4:r*4+4], want) {
			t.Fatalf("row %d: got %v, want %v (alone)", r, got[r*4:r*4+4], want)
		}
	}
}
