package wire_test

import (
	"context"
	"encoding/base64"
	"errors"
	"image"
	"image/color"
	"strings"
	"testing"

	"github.com/cluster-serving/cluster-serving/infer"
	"github.com/cluster-serving/cluster-serving/infer/infertest"
	"github.com/cluster-serving/cluster-serving/infer/wire"
)

// requireORT initialises ONNX Runtime for the test (see infertest).
func requireORT(tb testing.TB) { infertest.RequireLibrary(tb) }

// model returns the path of a committed test model of infer/testdata.
func model(name string) string { return infertest.Model(name) }

// fixture reads a file of infer/testdata/fixtures (see infertest.Fixture).
func fixture(tb testing.TB, rel string) []byte { return infertest.Fixture(tb, rel) }

// newEngine loads cfg's model on the real ONNX Runtime (see infertest).
func newEngine(tb testing.TB, cfg infer.Config) *infer.Engine { return infertest.NewEngine(tb, cfg) }

// newPredictor is the Predictor of newEngine(tb, cfg), named "m" version
// "1".
func newPredictor(tb testing.TB, cfg infer.Config) *wire.Predictor {
	tb.Helper()
	return wire.NewPredictor(newEngine(tb, cfg), wire.Model{Name: "m", Version: "1"})
}

// f32 builds a float32 tensor.
func f32(shape []int64, v ...float32) infer.Tensor {
	return infer.Tensor{DType: infer.Float32, Shape: shape, Data: v}
}

// bgrAt returns the B, G, R values (0-255) of img at (x, y), computed
// through image.Image.At, independently of infer's conversion.
func bgrAt(img image.Image, x, y int) [3]float32 {
	c := color.NRGBAModel.Convert(img.At(img.Bounds().Min.X+x, img.Bounds().Min.Y+y)).(color.NRGBA)
	return [3]float32{float32(c.B), float32(c.G), float32(c.R)}
}

func b64(b []byte) []byte { return []byte(base64.StdEncoding.EncodeToString(b)) }

// isInputError reports whether err is, or wraps, an *infer.InputError: the
// caller's fault, which a door answers with 400.
func isInputError(err error) bool {
	var ie *infer.InputError
	return errors.As(err, &ie)
}

// wantPredictInputError predicts body, of media type mediaType, on p and
// fails tb unless the answer is an *infer.InputError whose text holds
// want.
func wantPredictInputError(tb testing.TB, p *wire.Predictor, mediaType string, body []byte, want string) {
	tb.Helper()
	_, err := p.Predict(context.Background(), mediaType, body)
	if !isInputError(err) || !strings.Contains(err.Error(), want) {
		tb.Errorf("got %v, want an *InputError containing %q", err, want)
	}
}
