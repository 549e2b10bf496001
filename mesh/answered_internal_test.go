package mesh

import (
	"testing"

	"github.com/nats-io/nats.go"
)

// TestAnswerKey: a request is its NATS caller's reply subject and the
// time its door took it, whatever Nats-Msg-Id it was stored with (a
// request of a batch stored again alone gets a new one); a caller that
// sends again is a new request; only NATS callers' requests have one.
func TestAnswerKey(t *testing.T) {
	caller := Reply{ReplyCaller, "_INBOX.a.1"}
	h := func(received, msgID string) nats.Header {
		return nats.Header{HeaderReceived: {received}, HeaderMsgID: {msgID}}
	}
	base := answerKey(caller, h("100", "m1"))
	for _, tc := range []struct {
		name  string
		r     Reply
		h     nats.Header
		equal bool
	}{
		{"stored again with another id", caller, h("100", "m2"), true},
		{"sent again by its caller", caller, h("101", "m1"), false},
		{"another caller", Reply{ReplyCaller, "_INBOX.a.2"}, h("100", "m1"), false},
	} {
		if got := answerKey(tc.r, tc.h); (got == base) != tc.equal || len(got) != answerKeyLen {
			t.Errorf("%s: got key %x against %x, want equal %v", tc.name, got, base, tc.equal)
		}
	}
	// A durable record is its id, whenever its door handed it over.
	durable := Reply{ReplyDurable, "serving.j.results.redis"}
	if a, b := answerKey(durable, h("100", "m1")), answerKey(durable, h("200", "m1")); a == "" || a != b || a == base {
		t.Errorf("durable record handed over twice: got keys %x and %x (a caller's %x), want one of its own", a, b, base)
	}
	if answerKey(durable, h("100", "m1")) == answerKey(durable, h("100", "m2")) {
		t.Error("two durable records: got one key")
	}
	for _, r := range []Reply{{ReplyInbox, "_INBOX.door.1"}, {}} {
		if got := answerKey(r, h("100", "m1")); got != "" {
			t.Errorf("mode %d: got key %x, want none", r.Mode, got)
		}
	}
	if got := answerKey(caller, nats.Header{}); got != "" {
		t.Errorf("no Cs-Received nor Nats-Msg-Id: got key %x, want none", got)
	}
}
