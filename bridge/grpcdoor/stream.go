package grpcdoor

import (
	"context"
	"errors"
	"io"
	"strings"

	"google.golang.org/grpc"
	grpcstatus "google.golang.org/grpc/status"
	"google.golang.org/protobuf/encoding/protowire"
	"google.golang.org/protobuf/proto"

	"github.com/cluster-serving/cluster-serving/infer/wire/kservepb"
)

// StreamWindow is the most requests of one ModelStreamInfer stream in
// flight at once: received, not yet answered. The door reads the
// stream's next request only when one of them is answered, so a client
// that sends faster waits on the stream's HTTP/2 flow control, and one
// stream cannot hold more of the mesh than StreamWindow unary calls
// would. Each request also takes a token of the door's bucket, as a
// ModelInfer does.
const StreamWindow = 16

// streamInferHandler is the generated handler of ModelStreamInfer with
// frames in place of the decoded messages (see streamInfer).
func streamInferHandler(srv any, ss grpc.ServerStream) error {
	return srv.(*Door).streamInfer(ss)
}

// streamInfer serves a ModelStreamInfer stream: each ModelInferRequest
// it receives is served as a ModelInfer (inferFrame: the same model
// lookup, token bucket, timeout and errors, in a span of its own), up to
// StreamWindow at once, and answered by one ModelStreamInferResponse, in
// the order the requests came, as Triton answers a model that is not
// decoupled: its infer_response, or its error_message with the
// request's id, the stream staying open (errors in band). When the
// client half-closes, it answers the requests in flight, then ends the
// stream with OK. The token was checked when the stream opened
// (authTap). A message it cannot receive (over MaxRecvBytes) ends the
// stream with that error, once the requests in flight are answered; a
// client that cancels the stream cancels them.
func (d *Door) streamInfer(ss grpc.ServerStream) error {
	ctx, cancel := context.WithCancel(ss.Context())
	defer cancel()
	// Each request's answer, in the order received; the sender holds one
	// more, hence the capacity.
	pending := make(chan chan []byte, StreamWindow-1)
	sent := make(chan error, 1)
	go func() { sent <- sendInOrder(ss, pending, cancel) }()
	err := d.receive(ctx, ss, pending)
	close(pending)
	if serr := <-sent; serr != nil {
		return serr
	}
	return err
}

// receive reads the stream's requests until the client half-closes (nil)
// or the stream fails, and starts serving each, queueing its answer on
// pending.
func (d *Door) receive(ctx context.Context, ss grpc.ServerStream, pending chan<- chan []byte) error {
	for {
		in := &frame{}
		if err := ss.RecvMsg(in); err != nil {
			if errors.Is(err, io.EOF) {
				return nil
			}
			return err
		}
		answer := make(chan []byte, 1)
		select {
		case pending <- answer:
		case <-ctx.Done(): // the sender failed
			return ctx.Err()
		}
		go func() { answer <- d.serveStreamed(ctx, in) }()
	}
}

// sendInOrder sends each answer of pending as it is ready, in order, and
// returns once pending is closed and drained: every request's goroutine
// has then ended. After a failed send it cancels the requests left and
// sends no more.
func sendInOrder(ss grpc.ServerStream, pending <-chan chan []byte, cancel context.CancelFunc) error {
	var err error
	for answer := range pending {
		b := <-answer
		if err == nil {
			if err = ss.SendMsg(&frame{b: b}); err != nil {
				cancel()
			}
		}
	}
	return err
}

// streamInfo names a streamed request's span and its panic's log line.
var streamInfo = &grpc.UnaryServerInfo{FullMethod: kservepb.GRPCInferenceService_ModelStreamInfer_FullMethodName}

// unaryInterceptors are what every unary RPC, and every request of a
// stream, goes through, outermost first: a span, panic recovery.
func (d *Door) unaryInterceptors() []grpc.UnaryServerInterceptor {
	return []grpc.UnaryServerInterceptor{d.tracedUnary, d.recoverUnary}
}

// intercepted runs h on req through unaryInterceptors, as the server runs
// a unary RPC's handler.
func (d *Door) intercepted(ctx context.Context, req any, info *grpc.UnaryServerInfo, h grpc.UnaryHandler) (any, error) {
	ics := d.unaryInterceptors()
	for i := len(ics) - 1; i >= 0; i-- {
		ic, next := ics[i], h
		h = func(ctx context.Context, req any) (any, error) { return ic(ctx, req, info, next) }
	}
	return h(ctx, req)
}

// serveStreamed serves one request of a stream as a ModelInfer is served
// (intercepted) and returns its ModelStreamInferResponse, encoded.
func (d *Door) serveStreamed(ctx context.Context, in *frame) []byte {
	resp, err := d.intercepted(ctx, in, streamInfo, func(ctx context.Context, req any) (any, error) {
		return d.inferFrame(ctx, req.(*frame))
	})
	if err != nil {
		return streamError(in.b, err)
	}
	return streamAnswer(resp.(*frame).b)
}

// streamAnswer is the ModelStreamInferResponse holding the encoded
// ModelInferResponse resp as its infer_response (field 2), written
// around resp's bytes, which it does not decode.
func streamAnswer(resp []byte) []byte {
	b := make([]byte, 0, 1+protowire.SizeBytes(len(resp)))
	b = protowire.AppendTag(b, 2, protowire.BytesType)
	return protowire.AppendBytes(b, resp)
}

// streamError is the ModelStreamInferResponse of a request (req, its
// bytes) that failed with err: err's message as error_message, and an
// infer_response with the request's id, model name and version, so that
// the client knows which one failed. Only here is the request decoded
// whole, for its id; a request that does not decode gets none.
func streamError(req []byte, err error) []byte {
	r := &kservepb.ModelInferRequest{}
	if proto.Unmarshal(req, r) != nil {
		r = &kservepb.ModelInferRequest{}
	}
	// Valid UTF-8, as proto3 strings must be, so that Marshal cannot fail.
	msg := strings.ToValidUTF8(grpcstatus.Convert(err).Message(), "\uFFFD")
	b, _ := proto.Marshal(&kservepb.ModelStreamInferResponse{ErrorMessage: msg,
		InferResponse: &kservepb.ModelInferResponse{Id: r.Id, ModelName: r.ModelName, ModelVersion: r.ModelVersion}})
	return b
}
