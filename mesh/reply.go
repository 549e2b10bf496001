package mesh

import (
	"github.com/nats-io/nats.go"
)

// ReplyMode is how a worker's answer to one request goes back: the three
// reply paths of the mesh.
type ReplyMode uint8

const (
	// ReplyNone: the work message names no reply (a raw publish to the
	// work subject); the worker runs it and answers nobody.
	ReplyNone ReplyMode = iota
	// ReplyInbox: a door (HTTP, gRPC) waits on its Client's inbox for a
	// result message (Cs-Status, Cs-Error, the body): Client.Submit.
	ReplyInbox
	// ReplyDurable: the result is stored in the job's results stream with
	// a PubAck before the work is acked (the Redis door): Client.Enqueue.
	ReplyDurable
	// ReplyCaller: a NATS caller's own reply subject, answered as a micro
	// service answers (the body, or Nats-Service-Error-Code and
	// Nats-Service-Error): Client.Forward, the NATS door.
	ReplyCaller
)

// Reply is where the answer to one request goes. It travels in the work
// message's headers (Cs-Reply-To, Cs-Reply-Form, Cs-Result-To), written
// by set and read by replyOf and nowhere else, so that the three paths
// are one value on both sides of the queue.
type Reply struct {
	Mode ReplyMode
	// To is the subject the answer goes to: the door's inbox, a subject
	// under the job's results, or the caller's reply subject.
	To string
}

// set writes r into the headers of a work message.
func (r Reply) set(h nats.Header) {
	switch r.Mode {
	case ReplyInbox:
		h.Set(HeaderReplyTo, r.To)
	case ReplyDurable:
		h.Set(HeaderResultTo, r.To)
	case ReplyCaller:
		h.Set(HeaderReplyTo, r.To)
		h.Set(HeaderReplyForm, ReplyFormMicro)
	}
}

// replyOf reads where the answer to a work message goes. A durable result
// wins over a reply subject: a message carrying both (never one a Client
// built) is a record whose answer must be kept.
func replyOf(h nats.Header) Reply {
	if to := h.Get(HeaderResultTo); to != "" {
		return Reply{ReplyDurable, to}
	}
	to := h.Get(HeaderReplyTo)
	switch {
	case to == "":
		return Reply{}
	case h.Get(HeaderReplyForm) == ReplyFormMicro:
		return Reply{ReplyCaller, to}
	}
	return Reply{ReplyInbox, to}
}
