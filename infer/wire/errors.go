package wire

import (
	"errors"

	"github.com/cluster-serving/cluster-serving/infer/status"
)

// ErrNotCacheable is NewCacheRequest's error for a content type whose
// answers the response cache does not keep (all but the OIP formats).
var ErrNotCacheable = errors.New("wire: answers of this content type are not cached")

// unanswerable is an Encode failure of status 500: it reads as the
// codec's error and unwraps to it and to status.ErrUnanswerable.
type unanswerable struct{ err error }

func (u unanswerable) Error() string   { return u.err.Error() }
func (u unanswerable) Unwrap() []error { return []error{u.err, status.ErrUnanswerable} }
