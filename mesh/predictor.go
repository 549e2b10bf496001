package mesh

import "context"

// Predictor decodes a payload, runs the model and encodes the answer.
// Implementations must be safe for concurrent use; a Worker calls Predict
// from up to MaxInflight goroutines at once and relies on the Predictor to
// batch concurrent calls itself.
//
// An error implementing BadInput() bool that returns true means the payload
// is at fault: the caller gets status 400 and the record is not retried.
// Any other error (Temporary() bool marks a busy predictor) is retried with
// a growing delay until the attempts are spent.
type Predictor interface {
	Predict(ctx context.Context, contentType string, body []byte) ([]byte, error)
}
