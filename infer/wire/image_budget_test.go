package wire_test

import (
	"context"
	"slices"
	"strings"
	"sync"
	"testing"

	"github.com/cluster-serving/cluster-serving/infer/status"

	"github.com/cluster-serving/cluster-serving/infer"
	"github.com/cluster-serving/cluster-serving/infer/infertest"
	"github.com/cluster-serving/cluster-serving/infer/wire"
)

// TestPredictImageBombNextToGood: 5792×5792 PNGs sent with a good JPEG,
// at once, to a model with imageResize 224,224: each bomb is a 400 that
// names its size and imageMaxPixels, and the good image is answered.
func TestPredictImageBombNextToGood(t *testing.T) {
	p := newPredictor(t, infer.Config{ModelPath: model("image_mean"), ImageResize: [2]int{224, 224}})
	bomb := []byte(`{"instances":[{"x":"` + string(b64(infertest.BombPNG(t, 5792, 5792))) + `"}]}`)
	good := []byte(`{"instances":[{"x":"` + string(b64(fixture(t, "images/fish1.jpeg"))) + `"}]}`)
	var wg sync.WaitGroup
	bombErrs := make([]error, 4)
	for i := range bombErrs {
		wg.Go(func() { _, bombErrs[i] = p.Predict(context.Background(), wire.MediaTypeRedisJSON, bomb) })
	}
	var out []byte
	var goodErr error
	wg.Go(func() { out, goodErr = p.Predict(context.Background(), "", good) })
	wg.Wait()
	for i, err := range bombErrs {
		if status.Of(err) != status.BadInput || !strings.Contains(err.Error(), "5792x5792") || !strings.Contains(err.Error(), "imageMaxPixels") {
			t.Errorf("bomb %d: got %v (status %d), want a 400 naming 5792x5792 and imageMaxPixels", i, err, status.Of(err))
		}
	}
	if goodErr != nil {
		t.Fatalf("good image: %v", goodErr)
	}
	if _, shape := predictionTensor(t, out); !slices.Equal(shape, []int64{3}) {
		t.Errorf("good image: shape %v, want [3]", shape)
	}
}
