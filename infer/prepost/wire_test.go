package prepost_test

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"math"
	"slices"
	"testing"

	"google.golang.org/protobuf/proto"

	"github.com/cluster-serving/cluster-serving/infer"
	"github.com/cluster-serving/cluster-serving/infer/infertest"
	"github.com/cluster-serving/cluster-serving/infer/prepost"
	"github.com/cluster-serving/cluster-serving/infer/wire"
	"github.com/cluster-serving/cluster-serving/infer/wire/kservepb"
)

// predictor serves s as the repository does.
func predictor(s *prepost.Step) *wire.Predictor {
	return wire.NewRunnerPredictor(s, wire.Spec{Model: wire.Model{Name: s.Info().Name}, Info: s.Info()}, infer.Hooks{}, false)
}

// stepRequest is a step's request on the mesh, as an ensemble sends it:
// a ModelInferRequest with raw_input_contents.
func stepRequest(tb testing.TB, name string, t infer.Tensor) []byte {
	tb.Helper()
	req := &kservepb.ModelInferRequest{
		Inputs:           []*kservepb.ModelInferRequest_InferInputTensor{{Name: name, Datatype: wire.OIPDatatype(t.DType), Shape: t.Shape}},
		RawInputContents: [][]byte{wire.AppendRaw(nil, t)},
	}
	b, err := proto.Marshal(req)
	if err != nil {
		tb.Fatal(err)
	}
	return b
}

// stepAnswer reads a step's answer: its outputs by name.
func stepAnswer(tb testing.TB, body []byte) map[string]infer.Tensor {
	tb.Helper()
	var res kservepb.ModelInferResponse
	if err := proto.Unmarshal(body, &res); err != nil {
		tb.Fatal(err)
	}
	out := map[string]infer.Tensor{}
	for i, o := range res.Outputs {
		dt, _ := wire.OIPDType(o.Datatype)
		t, err := wire.DecodeRaw(res.RawOutputContents[i], dt, o.Shape, o.Name)
		if err != nil {
			tb.Fatal(err)
		}
		out[o.Name] = t
	}
	return out
}

// TestStepsOnTheMesh runs the steps through wire's KServe gRPC codec, the
// format of an ensemble's step requests: a batch of two JPEG files in,
// two image tensors out; two rows of scores in, their top 2 out.
func TestStepsOnTheMesh(t *testing.T) {
	ctx := context.Background()
	cat, dog := infertest.Fixture(t, "images/cat1.jpeg"), infertest.Fixture(t, "images/dog1.jpeg")
	pre := infer.ImagePre{Resize: [2]int{32, 32}, Channels: "RGB"}
	image := newStep(t, imageHead+param("imageResize", "32,32")+param("imageChannels", "RGB"))
	body, err := predictor(image).Predict(ctx, wire.MediaTypeKServeGRPC, stepRequest(t, prepost.ImageInput, stringTensor([]int64{2, 1}, cat, dog)))
	if err != nil {
		t.Fatalf("image step: %v", err)
	}
	got := stepAnswer(t, body)[prepost.ImageOutput]
	want := append(slices.Clone(redisDoorImage(t, cat, pre, []int64{-1, 3, 32, 32}).Data.([]float32)), redisDoorImage(t, dog, pre, []int64{-1, 3, 32, 32}).Data.([]float32)...)
	if !sameBits(got, f32([]int64{2, 3, 32, 32}, want...)) {
		t.Errorf("image step: got %s %s, want the Redis door's two images, [2 3 32 32]", got.DType, infer.ShapeString(got.Shape))
	}

	topN := newStep(t, topNHead+param("postProcessing", "topN(2)")+`input { name: "scores" data_type: TYPE_FP32 dims: [3] }`)
	body, err = predictor(topN).Predict(ctx, wire.MediaTypeKServeGRPC, stepRequest(t, prepost.TopNInput, f32([]int64{2, 3}, 0.2, 0.5, 0.3, 0.9, 0.05, 0.05)))
	if err != nil {
		t.Fatalf("topN step: %v", err)
	}
	outs := stepAnswer(t, body)
	for name, want := range map[string]string{
		prepost.TopNIndices: "int64 [2 2] [1 2 0 1]",
		prepost.TopNValues:  "float32 [2 2] [0.5 0.3 0.9 0.05]",
		prepost.TopNText:    "string [2 1] [[[1,0.5][2,0.3]] [[0,0.9][1,0.05]]]",
	} {
		if got := tensorString(outs[name]); got != want {
			t.Errorf("topN step %s: got %s, want %s", name, got, want)
		}
	}
}

// TestImageStepOIPJSON sends the image as base64 text in an OIP JSON
// BYTES tensor, which cannot carry a file's raw bytes.
func TestImageStepOIPJSON(t *testing.T) {
	fish := infertest.Fixture(t, "images/fish1.jpeg")
	s := newStep(t, imageHead+param("imageResize", "8,6"))
	req, _ := json.Marshal(map[string]any{"inputs": []any{map[string]any{
		"name": "image", "datatype": "BYTES", "shape": []int{1, 1}, "data": []string{base64.StdEncoding.EncodeToString(fish)}}}})
	body, err := predictor(s).Predict(context.Background(), wire.MediaTypeOIP, req)
	if err != nil {
		t.Fatal(err)
	}
	var res struct {
		Outputs []struct {
			Name  string    `json:"name"`
			Shape []int64   `json:"shape"`
			Data  []float64 `json:"data"`
		} `json:"outputs"`
	}
	if err := json.Unmarshal(body, &res); err != nil || len(res.Outputs) != 1 {
		t.Fatalf("answer %s: %v", body, err)
	}
	want := redisDoorImage(t, fish, infer.ImagePre{Resize: [2]int{8, 6}}, []int64{-1, 3, 8, 6}).Data.([]float32)
	o := res.Outputs[0]
	got := make([]float32, len(o.Data))
	for i, v := range o.Data {
		got[i] = float32(v)
	}
	if o.Name != prepost.ImageOutput || !slices.Equal(o.Shape, []int64{1, 3, 8, 6}) ||
		!slices.EqualFunc(got, want, func(a, b float32) bool { return math.Float32bits(a) == math.Float32bits(b) }) {
		t.Errorf("got %s %v, want %s [1 3 8 6] holding the Redis door's image", o.Name, o.Shape, prepost.ImageOutput)
	}
}
