package wire

import "github.com/cluster-serving/cluster-serving/infer/status"

// unanswerable is an Encode failure of status 500: it reads as the
// codec's error and unwraps to it and to status.ErrUnanswerable.
type unanswerable struct{ err error }

func (u unanswerable) Error() string   { return u.err.Error() }
func (u unanswerable) Unwrap() []error { return []error{u.err, status.ErrUnanswerable} }
