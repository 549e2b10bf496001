package mesh

import (
	"errors"
	"fmt"
	"net/http"
	"strconv"
	"strings"
	"time"

	"github.com/cluster-serving/cluster-serving/infer/status"
	"github.com/cluster-serving/cluster-serving/infer/timing"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"github.com/nats-io/nats.go/micro"
)

// Result is the answer to one request.
type Result struct {
	// URI is the client's record id (Cs-Uri).
	URI string
	// Body is the Predictor's output; empty for a non-200 status.
	Body []byte
	// Status is status.OK or an error status (400, 500, 503, 504).
	Status int
	// Message is the error message of a non-200 status.
	Message string
	// Header is the result message's headers: trace context (the
	// worker's span), Nats-Msg-Id of a durable record. Nil for a
	// synchronous Submit.
	Header nats.Header
	// Compute is the worker's compute time of a 200 answer to Submit
	// (Input, Infer, Output; HeaderCompute), zero when it sent none.
	Compute timing.Times
}

// setCompute writes t's compute times into h (HeaderCompute).
func setCompute(h nats.Header, t timing.Times) {
	h.Set(HeaderCompute, strconv.FormatInt(int64(t.Input), 10)+","+strconv.FormatInt(int64(t.Infer), 10)+","+strconv.FormatInt(int64(t.Output), 10))
}

// computeOf reads HeaderCompute; zero when missing or unreadable.
func computeOf(h nats.Header) timing.Times {
	parts := strings.Split(h.Get(HeaderCompute), ",")
	if len(parts) != 3 {
		return timing.Times{}
	}
	var ns [3]int64
	for i, p := range parts {
		n, err := strconv.ParseInt(p, 10, 64)
		if err != nil || n < 0 {
			return timing.Times{}
		}
		ns[i] = n
	}
	return timing.Times{Input: time.Duration(ns[0]), Infer: time.Duration(ns[1]), Output: time.Duration(ns[2])}
}

// Err returns nil for status.OK and a *status.Error otherwise.
func (r Result) Err() error {
	if r.Status == status.OK {
		return nil
	}
	return &status.Error{Status: r.Status, Message: r.Message}
}

// resultMsg builds the message a worker sends for one record.
func resultMsg(subject string, work nats.Header, st int, body []byte, errMsg string) *nats.Msg {
	m := nats.NewMsg(subject)
	m.Data = body
	m.Header.Set(HeaderURI, work.Get(HeaderURI))
	m.Header.Set(HeaderStatus, strconv.Itoa(st))
	if errMsg != "" {
		m.Header.Set(HeaderError, oneLine(errMsg))
	}
	for _, k := range []string{HeaderTraceParent, HeaderTraceState} {
		if v := work.Values(k); len(v) > 0 {
			m.Header[k] = v
		}
	}
	return m
}

// microReply builds the reply a NATS door's caller reads (ReplyFormMicro):
// the body alone on success, as micro.Request.Respond sends it; an error
// as micro.Request.Error does, the status in Nats-Service-Error-Code and
// the message in Nats-Service-Error, without a body.
func microReply(subject string, st int, body []byte, errMsg string) *nats.Msg {
	if st == status.OK {
		return &nats.Msg{Subject: subject, Data: body}
	}
	if errMsg == "" {
		errMsg = http.StatusText(st)
	}
	return &nats.Msg{Subject: subject, Header: nats.Header{
		micro.ErrorCodeHeader: {strconv.Itoa(st)},
		micro.ErrorHeader:     {oneLine(errMsg)},
	}}
}

// parseResult reads a result message. A missing or unreadable status is 500.
func parseResult(h nats.Header, body []byte) Result {
	r := Result{URI: uriOf(h), Message: h.Get(HeaderError), Compute: computeOf(h)}
	st, err := strconv.Atoi(h.Get(HeaderStatus))
	if err != nil || st < 100 || st > 599 {
		st = status.Internal
		if r.Message == "" {
			r.Message = "result without a valid " + HeaderStatus + " header"
		}
	}
	r.Status = st
	if st == status.OK {
		r.Body = body
	}
	return r
}

// maxErrorBytes bounds the Cs-Error header: an error message that quotes
// a huge input must not make the result itself too large to publish
// (headers over 64 KiB are refused for good).
const maxErrorBytes = 1024

// oneLine keeps header values on one line (NATS headers cannot hold CR/LF)
// and at most maxErrorBytes long, cut on a UTF-8 boundary.
func oneLine(s string) string {
	if len(s) > maxErrorBytes {
		s = strings.ToValidUTF8(s[:maxErrorBytes-3], "") + "..."
	}
	return strings.NewReplacer("\r", " ", "\n", " ").Replace(s)
}

// mapPublishErr turns a DiscardNew rejection into ErrQueueFull, a server
// out of storage into ErrNoStorage, and a
// message larger than the NATS max payload (the client's
// nats.ErrMaxPayload, or the server's "maximum payload exceeded"), or a
// header or message the stream refuses as too large (API errors 10097,
// 10054), into an error wrapping status.ErrTooLarge: it can never be queued.
func mapPublishErr(err error) error {
	if errors.Is(err, nats.ErrMaxPayload) || strings.Contains(err.Error(), "maximum payload exceeded") {
		return fmt.Errorf("%w: %w", status.ErrTooLarge, err)
	}
	var apiErr *jetstream.APIError
	if errors.As(err, &apiErr) && (apiErr.ErrorCode == jsErrCodeHeaderTooLarge || apiErr.ErrorCode == jsErrCodeMsgTooLarge) {
		return fmt.Errorf("%w: %w", status.ErrTooLarge, err)
	}
	if errors.As(err, &apiErr) && (apiErr.ErrorCode == jsErrCodeNoStorage || apiErr.ErrorCode == jsErrCodeNoResources) {
		return fmt.Errorf("%w: %w", ErrNoStorage, err)
	}
	if errors.As(err, &apiErr) && apiErr.ErrorCode == jsErrCodeStoreFailed {
		d := apiErr.Description
		if strings.Contains(d, "per subject") {
			// A priority level's queue at its max_queue_size (schedule.go).
			return fmt.Errorf("%w: %w", ErrMaxQueueSize, err)
		}
		if strings.Contains(d, "maximum messages") || strings.Contains(d, "maximum bytes") {
			return fmt.Errorf("%w: %w", ErrQueueFull, err)
		}
	}
	return err
}

// jsErrCodeStoreFailed is nats-server's JSStreamStoreFailedF, the code a
// DiscardNew stream answers with when it is full; jsErrCodeNoStorage its
// JSStorageResourcesExceededErr (the server's disk), jsErrCodeNoResources
// its JSInsufficientResourcesErr (its max_file or max_mem reached).
const (
	jsErrCodeStoreFailed jetstream.ErrorCode = 10077
	jsErrCodeNoStorage   jetstream.ErrorCode = 10047
	jsErrCodeNoResources jetstream.ErrorCode = 10023
)

// nats-server's JSStreamHeaderExceedsMaximumErr (a header over 64 KiB) and
// JSStreamMessageExceedsMaximumErr (a message over the stream's max): the
// message can never be stored.
const (
	jsErrCodeHeaderTooLarge jetstream.ErrorCode = 10097
	jsErrCodeMsgTooLarge    jetstream.ErrorCode = 10054
)
