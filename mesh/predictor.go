package mesh

import "context"

// Predictor decodes a payload, runs the model and encodes the answer.
// Implementations must be safe for concurrent use; a Worker calls Predict
// from up to MaxInflight goroutines at once and relies on the Predictor to
// batch concurrent calls itself.
//
// The Worker maps an error to its status with status.Of (the
// *wire.Predictor returns *infer.InputError for bad input, infer's
// ErrQueueFull when busy). A status saying the request is at fault (a 4xx
// but 429 and 499: an *infer.InputError, status.ErrBadInput) is sent to the
// caller as it is and the record is not retried. Any other error (a busy
// predictor, status.ErrBusy) is retried with a growing delay until the
// attempts are spent.
type Predictor interface {
	Predict(ctx context.Context, contentType string, body []byte) ([]byte, error)
}
