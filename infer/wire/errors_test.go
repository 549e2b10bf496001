package wire_test

import (
	"context"
	"errors"
	"strings"
	"testing"

	"github.com/cluster-serving/cluster-serving/infer/status"

	"github.com/cluster-serving/cluster-serving/infer"
	"github.com/cluster-serving/cluster-serving/infer/wire"
)

// failingEncoder decodes any body as one record of add_f32's input (four
// ones) and fails to encode, as a codec does whose format cannot carry an
// output.
type failingEncoder struct{}

const mediaTypeFailingEncoder = "application/x-failing-encoder-test"

func init() { wire.RegisterCodec(mediaTypeFailingEncoder, failingEncoder{}) }

func (failingEncoder) Decode(context.Context, []byte, *wire.Spec) (*wire.Request, error) {
	x := infer.Tensor{DType: infer.Float32, Shape: []int64{4}, Data: []float32{1, 1, 1, 1}}
	return &wire.Request{Records: [][]infer.Tensor{{x}}}, nil
}

func (failingEncoder) Encode(*wire.Request, [][]infer.Tensor, *wire.Spec) ([]byte, error) {
	return nil, errors.New("cannot encode output \"y\" in this format")
}

// TestEncodeFailureIsUnanswerable checks that a codec that cannot write
// the outputs gives a 500 that wraps ErrUnanswerable (so that a worker
// answers it at once instead of retrying it), keeping the codec's message.
func TestEncodeFailureIsUnanswerable(t *testing.T) {
	p := newPredictor(t, infer.Config{ModelPath: model("add_f32")})
	_, err := p.Predict(context.Background(), mediaTypeFailingEncoder, nil)
	if !errors.Is(err, status.ErrUnanswerable) || status.Of(err) != status.Internal || !strings.Contains(err.Error(), "cannot encode") {
		t.Fatalf("got %v (status %d), want a 500 wrapping ErrUnanswerable with the codec's message", err, status.Of(err))
	}
}
