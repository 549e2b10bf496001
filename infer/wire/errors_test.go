package wire_test

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"

	"github.com/cluster-serving/cluster-serving/infer"
	"github.com/cluster-serving/cluster-serving/infer/wire"
)

func TestStatus(t *testing.T) {
	tests := []struct {
		name string
		err  error
		want int
	}{
		{"nil", nil, wire.StatusOK},
		{"answer", fmt.Errorf("submit: %w", &wire.Error{Status: 504, Message: "late"}), 504},
		{"input error", fmt.Errorf("decode: %w", infer.NewInputError(0, "x", "bad")), wire.StatusBadInput},
		{"bad input", wire.ErrBadInput, wire.StatusBadInput},
		{"not found", fmt.Errorf("model: %w", wire.ErrNotFound), wire.StatusNotFound},
		{"too large", fmt.Errorf("publish: %w", wire.ErrTooLarge), wire.StatusTooLarge},
		{"too many", wire.ErrTooManyRequests, wire.StatusTooManyRequests},
		{"busy", wire.ErrBusy, wire.StatusBusy},
		{"engine queue full", fmt.Errorf("infer: %w", infer.ErrQueueFull), wire.StatusBusy},
		{"engine closed", infer.ErrClosed, wire.StatusBusy},
		{"image budget", fmt.Errorf("decode: %w", infer.ErrImageBudget), wire.StatusBusy},
		{"timeout", wire.ErrTimeout, wire.StatusTimeout},
		{"deadline", fmt.Errorf("wait: %w", context.DeadlineExceeded), wire.StatusTimeout},
		{"canceled", context.Canceled, wire.StatusClientClosed},
		{"other", errors.New("boom"), wire.StatusInternal},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := wire.Status(tt.err); got != tt.want {
				t.Errorf("Status(%v): got %d, want %d", tt.err, got, tt.want)
			}
		})
	}
}

func TestErrorUnwrapsToItsSentinel(t *testing.T) {
	tests := []struct {
		status int
		want   error
	}{
		{400, wire.ErrBadInput},
		{404, wire.ErrNotFound},
		{413, wire.ErrTooLarge},
		{429, wire.ErrTooManyRequests},
		{503, wire.ErrBusy},
		{504, wire.ErrTimeout},
	}
	for _, tt := range tests {
		err := fmt.Errorf("mesh: %w", &wire.Error{Status: tt.status, Message: "m"})
		if !errors.Is(err, tt.want) {
			t.Errorf("status %d: errors.Is(%v, %v) is false, want true", tt.status, err, tt.want)
		}
		if got := wire.Status(err); got != tt.status {
			t.Errorf("status %d: Status: got %d", tt.status, got)
		}
	}
	if err := (&wire.Error{Status: 500, Message: "m"}); errors.Unwrap(err) != nil {
		t.Errorf("status 500: Unwrap: got %v, want nil", errors.Unwrap(err))
	}
	if got, want := (&wire.Error{Status: 400, Message: "no"}).Error(), "status 400: no"; got != want {
		t.Errorf("Error(): got %q, want %q", got, want)
	}
}

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
	if !errors.Is(err, wire.ErrUnanswerable) || wire.Status(err) != wire.StatusInternal || !strings.Contains(err.Error(), "cannot encode") {
		t.Fatalf("got %v (status %d), want a 500 wrapping ErrUnanswerable with the codec's message", err, wire.Status(err))
	}
}
