package mesh

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
)

// bucketGetTimeout bounds a leader get whose ctx has no deadline: a
// client's poll waits for it (KEYS, then HGET and DEL of each key), and
// a get that fails is asked again at the next poll.
const bucketGetTimeout = time.Second

// errDisconnected is last's error while the connection to NATS is down.
var errDisconnected = errors.New("not connected to NATS (reconnecting)")

// last reads the last message of key from the bucket's stream leader
// (the JetStream API's STREAM.MSG.GET, which a replica never answers);
// nil when the stream has none. It fails at once while the connection
// reconnects, and within bucketGetTimeout unless ctx says otherwise.
func (b *ResultBucket) last(ctx context.Context, key string) (*jetstream.RawStreamMsg, error) {
	if !b.js.Conn().IsConnected() {
		return nil, errDisconnected // fail now, not at the timeout
	}
	if _, ok := ctx.Deadline(); !ok {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, bucketGetTimeout)
		defer cancel()
	}
	req, err := json.Marshal(struct {
		LastBySubject string `json:"last_by_subj"`
	}{b.subject + key})
	if err != nil {
		return nil, err
	}
	reply, err := b.js.Conn().RequestWithContext(ctx, b.msgGet, req)
	if err != nil {
		return nil, err
	}
	var resp struct {
		Message *struct {
			Sequence uint64 `json:"seq"`
			Header   []byte `json:"hdrs"`
			Data     []byte `json:"data"`
		} `json:"message"`
		Error *jetstream.APIError `json:"error"`
	}
	if err := json.Unmarshal(reply.Data, &resp); err != nil {
		return nil, fmt.Errorf("stream leader's answer: %w", err)
	}
	switch {
	case resp.Error != nil && resp.Error.ErrorCode == jetstream.JSErrCodeMessageNotFound:
		return nil, nil
	case resp.Error != nil:
		return nil, resp.Error
	case resp.Message == nil:
		return nil, errors.New("stream leader's answer has no message")
	}
	m := &jetstream.RawStreamMsg{Subject: b.subject + key, Sequence: resp.Message.Sequence, Data: resp.Message.Data}
	if len(resp.Message.Header) > 0 {
		if m.Header, err = nats.DecodeHeadersMsg(resp.Message.Header); err != nil {
			return nil, fmt.Errorf("stream leader's answer: %w", err)
		}
	}
	return m, nil
}
