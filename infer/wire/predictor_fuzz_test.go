package wire_test

import (
	"context"
	"encoding/json"
	"testing"

	"github.com/cluster-serving/cluster-serving/infer"
	"github.com/cluster-serving/cluster-serving/infer/infertest"
	"github.com/cluster-serving/cluster-serving/infer/wire"
)

// fuzzModels are the real models FuzzPredictOIP sends bodies to: scalar
// inputs and outputs, two inputs, a fixed batch dim, integer division by
// request inputs (a zero there must be a 400, never SIGFPE), no inputs.
var fuzzModels = []string{"add_f32", "clip_scalar", "sum_scalar", "two_io", "fixed_f32", "divmod_i32", "div_i32", "no_inputs"}

// FuzzPredictOIP sends any body, as OIP, through a wire.Predictor to a
// real model on ONNX Runtime: the process must survive, and the answer be
// 200 with an OIP response, or 400 or 413 with a message.
func FuzzPredictOIP(f *testing.F) {
	infertest.RequireLibrary(f)
	preds := make([]*wire.Predictor, len(fuzzModels))
	for i, m := range fuzzModels {
		preds[i] = wire.NewPredictor(newEngine(f, infer.Config{ModelPath: model(m), MaxBatch: 4}), wire.Model{Name: m})
	}
	for i, body := range []string{
		`{"inputs":[{"name":"x","datatype":"FP32","shape":[2,4],"data":[1,2,3,4,5,6,7,8]}]}`,
		`{"inputs":[{"name":"x","datatype":"FP32","shape":[1,4],"data":[1,2,3,4]},{"name":"lo","datatype":"FP32","shape":[],"data":0},{"name":"hi","datatype":"FP32","shape":[],"data":[1]}]}`,
		`{"inputs":[{"name":"x","datatype":"FP32","shape":[0,4],"data":[]}]}`,
		`{"inputs":[{"name":"a","datatype":"FP32","shape":[1,3],"data":[1,2,3]},{"name":"b","datatype":"FP32","shape":[2,3],"data":[1,2,3,4,5,6]}]}`,
		`{"inputs":[{"name":"x","datatype":"FP32","shape":[1,4],"data":[1,2]}]}`,
		`{"inputs":[{"name":"a","datatype":"INT32","shape":[1,4],"data":[7,7,7,-2147483648]},{"name":"b","datatype":"INT32","shape":[1,4],"data":[1,2,0,-1]}]}`,
		`{"inputs":[{"name":"x","datatype":"INT32","shape":[2,4],"data":[1,2,3,4,5,6,7,0]}]}`,
		`{"inputs":[]}`,
		// A short body claiming a huge shape once made the decoder
		// allocate for the shape and end the process out of memory.
		`{"inputs":[{"name":"x","datatype":"FP32","shape":[500000000,4],"data":[1]}]}`,
	} {
		f.Add(uint8(i), []byte(body))
	}
	f.Fuzz(func(t *testing.T, m uint8, body []byte) {
		p := preds[int(m)%len(preds)]
		out, err := p.Predict(context.Background(), wire.MediaTypeOIP, body)
		switch status := wire.Status(err); {
		case status == wire.StatusOK:
			var resp infertest.OIPResponse
			if err := json.Unmarshal(out, &resp); err != nil || len(resp.Outputs) == 0 {
				t.Fatalf("%s: 200 with %q (%v), want an OIP response", fuzzModels[int(m)%len(preds)], out, err)
			}
		case status != wire.StatusBadInput && status != wire.StatusTooLarge:
			t.Fatalf("%s: got status %d (%v), want 200, 400 or 413", fuzzModels[int(m)%len(preds)], status, err)
		case err.Error() == "":
			t.Fatalf("%s: status %d without a message", fuzzModels[int(m)%len(preds)], status)
		}
	})
}
