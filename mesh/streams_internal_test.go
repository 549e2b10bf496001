package mesh

import (
	"testing"

	"github.com/nats-io/nats.go/jetstream"
)

// TestSameStreamNoLimit: the server tells "no limit" as -1 where the config
// asked 0; a stream read back as it was made is the same stream, so that
// ensureStream does not update it on every process start.
func TestSameStreamNoLimit(t *testing.T) {
	want := jetstream.StreamConfig{Subjects: []string{"s.>"}, MaxAge: 1}
	have := want
	have.MaxMsgs, have.MaxBytes = -1, -1
	if !sameStream(have, want) {
		t.Errorf("limits -1 (as the server tells them) against 0 (as asked): got different, want the same")
	}
	have.MaxMsgs = 100
	if sameStream(have, want) {
		t.Errorf("MaxMsgs 100 against none: got the same, want different")
	}
}
