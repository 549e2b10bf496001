package prepost_test

import (
	"context"
	"testing"

	"github.com/cluster-serving/cluster-serving/infer"
	"github.com/cluster-serving/cluster-serving/infer/infertest"
	"github.com/cluster-serving/cluster-serving/infer/wire"
)

// TestSeedPipeline chains image step → ONNX model → topN step, the
// seed's image pipeline as an ensemble runs it, and compares its answer
// with the Redis door's for the same image on an engine configured with
// imageResize and postProcessing: the same topN string, byte for byte.
func TestSeedPipeline(t *testing.T) {
	ctx := context.Background()
	model := infertest.NewEngine(t, infer.Config{ModelPath: infertest.Model("image_mean")}) // [-1,3,224,224] -> channel means [-1,3]
	door := wire.NewPredictor(infertest.NewEngine(t, infer.Config{ModelPath: infertest.Model("image_mean"),
		ImageResize: [2]int{224, 224}, PostProcessing: "topN(2)"}), wire.Model{})
	image := newStep(t, imageHead+param("imageResize", "224,224"))
	topN := newStep(t, topNHead+param("postProcessing", "topN(2)")+`input { name: "scores" data_type: TYPE_FP32 dims: [3] }`)
	for _, name := range []string{"cat1.jpeg", "dog1.jpeg", "fish1.jpeg"} {
		t.Run(name, func(t *testing.T) {
			img := infertest.Fixture(t, "images/"+name)
			want, err := door.Predict(ctx, wire.MediaTypeRedisArrow, redisPayload(t, img))
			if err != nil {
				t.Fatalf("Redis door: %v", err)
			}

			out, err := image.Infer(ctx, [][]infer.Tensor{{stringTensor([]int64{1}, img)}})
			if err == nil {
				out, err = model.Infer(ctx, out)
			}
			if err == nil {
				out, err = topN.Infer(ctx, out)
			}
			if err != nil {
				t.Fatalf("pipeline: %v", err)
			}
			if got := out[0][2].Data.([]string)[0]; got != string(want) {
				t.Errorf("pipeline text: got %s, want the Redis door's %s", got, want)
			}
			t.Logf("topN: %s", want)
			if idx := out[0][0].Data.([]int64); len(idx) != 2 {
				t.Errorf("pipeline indices: got %v, want 2", idx)
			}
		})
	}
}
