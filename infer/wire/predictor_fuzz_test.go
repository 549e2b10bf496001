package wire_test

import (
	"context"
	"encoding/json"
	"testing"

	"github.com/cluster-serving/cluster-serving/infer/status"

	"github.com/cluster-serving/cluster-serving/infer"
	"github.com/cluster-serving/cluster-serving/infer/infertest"
	"github.com/cluster-serving/cluster-serving/infer/wire"
)

// fuzzModels are the real models FuzzPredictOIP sends bodies to: scalar
// inputs and outputs, two inputs, a fixed batch dim, integer division by
// request inputs (a zero there must be a 400, never SIGFPE), no inputs,
// and 16-bit floats and uint64 (a float16 output with a dynamic second
// dim, allocated by Session).
var fuzzModels = []string{"add_f32", "clip_scalar", "sum_scalar", "two_io", "fixed_f32", "divmod_i32", "div_i32", "no_inputs", "cast_f32_f16_seq", "identity_bf16", "identity_u64"}

// fuzzPaths are the doors' media types a fuzzed body is sent as: the
// HTTP door's OIP, the NATS and HTTP doors' JSON instances, the Redis
// door's Arrow and JSON entries.
var fuzzPaths = []string{wire.MediaTypeOIP, wire.MediaTypeJSON, wire.MediaTypeRedisArrow, wire.MediaTypeRedisJSON}

// FuzzPredict sends any body, as any door's media type, through a
// wire.Predictor to a real model on ONNX Runtime: the process must
// survive, and the answer be 200 with a body, or 400 or 413 with a
// message. Seeds hold scalars, zero-size dims and lengths that do not
// match the shape.
func FuzzPredict(f *testing.F) {
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
		f.Add(uint8(i), uint8(0), []byte(body))
	}
	for i, body := range []string{
		`{"instances":[{"x":[1,2,3,4]}]}`, `{"instances":[{"x":1.5}]}`, `{"instances":[{"x":[]}]}`,
		`{"instances":[{"x":[1,2,3,4],"lo":0,"hi":[1]}]}`, `{"instances":[{"a":[1,2,3],"b":[1]}]}`,
		`{"instances":[{"a":[7,7],"b":[0,-1]}]}`, `{"instances":[{"x":{"shape":[0],"data":[],"indices":[[]]}}]}`,
		`{"instances":[]}`, `{"instances":[{"x":[[]]}]}`, `{"instances":[{"x":[65504,-1e9]}]}`,
	} {
		f.Add(uint8(i), uint8(1), []byte(body))
		f.Add(uint8(i), uint8(3), []byte(body))
	}
	for i, name := range []string{"ndarray-128-base64", "arrowBytes"} {
		f.Add(uint8(i), uint8(2), fixture(f, "payloads/"+name))
	}
	f.Fuzz(func(t *testing.T, m, path uint8, body []byte) {
		p, name, ct := preds[int(m)%len(preds)], fuzzModels[int(m)%len(preds)], fuzzPaths[int(path)%len(fuzzPaths)]
		out, err := p.Predict(context.Background(), ct, body)
		switch st := status.Of(err); {
		case st == status.OK:
			if len(out) == 0 {
				t.Fatalf("%s as %s: 200 with an empty body", name, ct)
			}
			var resp infertest.OIPResponse
			if ct == wire.MediaTypeOIP && (json.Unmarshal(out, &resp) != nil || len(resp.Outputs) == 0) {
				t.Fatalf("%s as %s: 200 with %q, want an OIP response", name, ct, out)
			}
		case st != status.BadInput && st != status.TooLarge:
			t.Fatalf("%s as %s: got st %d (%v), want 200, 400 or 413", name, ct, st, err)
		case err.Error() == "":
			t.Fatalf("%s as %s: st %d without a message", name, ct, st)
		}
	})
}
