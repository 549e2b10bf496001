package mesh

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"strconv"
	"sync"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"github.com/nats-io/nuid"
	"go.opentelemetry.io/otel/trace"

	"github.com/cluster-serving/cluster-serving/telemetry"
)

// DefaultSubmitTimeout bounds a Submit whose ctx has no deadline.
const DefaultSubmitTimeout = time.Minute

// ClientConfig configures a Client. The zero value means all defaults.
type ClientConfig struct {
	// Timeout bounds Submit and Enqueue when ctx has no deadline, so every
	// work message carries a Cs-Deadline. Default 1m.
	Timeout time.Duration
	// AttemptTimeout bounds the wait for one partition's PubAck; past it
	// the publish goes to the next partition (and that partition is tried
	// last for a few seconds). Default DefaultAttemptTimeout (750ms).
	AttemptTimeout time.Duration
	// Coalesce is the most requests Submit and Forward store in one work
	// message while earlier stores of the job are in flight (see
	// coalesce.go). Default DefaultCoalesce (64); 1 stores each alone.
	Coalesce int
	// Local lets this process's workers hand the Client their answers in
	// memory rather than through NATS (local.go): for a door in the same
	// process as workers, as `start` runs them.
	Local bool
}

// Validate reports the first invalid field, wrapping ErrInvalidConfig.
func (c ClientConfig) Validate() error {
	return CheckLimits(ErrInvalidConfig, Limit{"Timeout", c.Timeout}, Limit{"AttemptTimeout", c.AttemptTimeout}, Limit{"Coalesce", c.Coalesce})
}

// Request is one record a door submits.
type Request struct {
	// URI is the client's record id, copied onto the result.
	URI string
	// ContentType tells the Predictor how to decode Body. Default application/json.
	ContentType string
	// Body is the payload as it came (Arrow bytes, JSON instances).
	Body []byte
	// MsgID, when set, lets JetStream drop a second request with the same id
	// within DuplicateWindow, and picks the partition tried first. Without
	// one the Client generates one, so that its own retries store once.
	MsgID string
	// Header holds extra headers passed through to the worker, such as
	// traceparent. Cs-* headers set here are overwritten.
	Header nats.Header
	// Schedule is the request's priority level and queue timeout
	// (schedule.go); the zero value is the job's default.
	Schedule Schedule
}

// Client publishes requests to work queues and waits for their results.
// It is what the doors use. A publish goes to whichever partition of the
// job's work queue answers first (see router), so that a stream leader
// being elected does not stop a door. A Client is safe for concurrent
// use; one wildcard inbox subscription serves all its synchronous
// requests.
type Client struct {
	nc      *nats.Conn
	js      jetstream.JetStream
	timeout time.Duration
	prefix  string // inbox prefix; replies come to prefix + "." + reqID
	sub     *nats.Subscription
	route   *router
	parts   partitionCache

	// coalesce is ClientConfig.Coalesce; coalescers maps a job to its
	// *coalescer.
	coalesce   int
	coalescers sync.Map

	// fullUntil maps a job to when (time.Time) publishPurging may purge
	// its work queue again after it found it full of unanswered records.
	fullUntil sync.Map

	large *bodies // bodies past max_payload (large.go)

	mu      sync.Mutex
	pending map[string]chan *nats.Msg
	closed  bool
	// reconnected is closed, and replaced, each time nc reconnects: a
	// Submit waiting then may have lost its answer (resubmit.go).
	reconnected chan struct{}
}

// NewClient subscribes the Client's reply inbox on nc. The caller keeps
// ownership of nc; Close the Client before closing nc.
func NewClient(nc *nats.Conn, cfg ClientConfig) (*Client, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	cfg.Timeout = cmp.Or(cfg.Timeout, DefaultSubmitTimeout)
	cfg.AttemptTimeout = cmp.Or(cfg.AttemptTimeout, DefaultAttemptTimeout)
	js, err := jetstream.New(nc)
	if err != nil {
		return nil, fmt.Errorf("mesh: jetstream: %w", err)
	}
	c := &Client{
		nc:       nc,
		js:       js,
		timeout:  cfg.Timeout,
		route:    newRouter(cfg.AttemptTimeout),
		coalesce: cmp.Or(cfg.Coalesce, DefaultCoalesce),
		parts:    partitionCache{js: js, lookup: cfg.AttemptTimeout},
		prefix:   nc.NewInbox(),
		pending:  make(map[string]chan *nats.Msg),
		large:    newBodies(nc, js),
	}
	c.reconnected = make(chan struct{})
	c.watchReconnects()
	c.sub, err = nc.Subscribe(c.prefix+".*", c.onReply)
	if err != nil {
		return nil, fmt.Errorf("mesh: subscribe inbox: %w", err)
	}
	// Replies are small and must not be dropped as a slow consumer.
	_ = c.sub.SetPendingLimits(-1, 256<<20)
	if cfg.Local {
		c.listenLocal()
	}
	return c, nil
}

func (c *Client) onReply(m *nats.Msg) {
	if m.Reply != "" {
		// The worker's bouncer keeps the answer until told it came
		// (bounce.go), a second copy too.
		_ = c.nc.Publish(m.Reply, nil)
	}
	c.take(m)
}

// Submit publishes req to job's work queue and waits for its result. It
// returns the Result and, for a non-200 status, a *Error; ErrQueueFull when
// the queue is full; ErrDuplicate when req.MsgID was seen already;
// ErrUnavailable (503) when no partition stored req before ctx ended;
// status.ErrTooLarge when NATS can never take it; ctx.Err() when ctx ends
// while a worker has it (the work message carries ctx's deadline, so a
// worker drops it unrun once it expires).
func (c *Client) Submit(ctx context.Context, job string, req Request) (Result, error) {
	if err := checkRequest(job, req); err != nil {
		return Result{}, err
	}
	id := nuid.Next()
	ch := make(chan *nats.Msg, 1)
	c.mu.Lock()
	if c.closed {
		c.mu.Unlock()
		return Result{}, ErrClosed
	}
	c.pending[id] = ch
	c.mu.Unlock()
	defer func() {
		c.mu.Lock()
		delete(c.pending, id)
		c.mu.Unlock()
	}()

	// The publish span covers the request's time in the mesh: from the
	// publish to the reply. The worker's spans are its children.
	ctx, m, end, err := c.begin(ctx, job, req, Reply{ReplyInbox, c.prefix + "." + id})
	if err != nil {
		return Result{}, err
	}
	res, err := c.await(ctx, job, req, m, ch)
	if err == nil {
		if span := trace.SpanFromContext(ctx); span.IsRecording() {
			span.SetAttributes(telemetry.AttrStatus.Int(res.Status))
		}
	}
	end(err)
	return res, err
}

func (c *Client) await(ctx context.Context, job string, req Request, m *nats.Msg, ch chan *nats.Msg) (Result, error) {
	reconnected := c.reconnects()
	st, err := c.store(ctx, job, req, m)
	if err != nil {
		if errors.Is(ctx.Err(), context.Canceled) {
			c.cancel(job, m) // gone while it was stored: a batch may still store it
		}
		return Result{}, fmt.Errorf("mesh: submit to %s: %w", job, err)
	}
	if st.ack.Duplicate && !st.retried {
		// Another request with this id is queued; its caller gets the answer.
		return Result{}, fmt.Errorf("mesh: submit to %s: %w: %s", job, ErrDuplicate, req.MsgID)
	}
	for {
		select {
		case reply, ok := <-ch:
			if !ok {
				return Result{}, ErrClosed
			}
			// A copy stored twice (a timed-out attempt that its partition
			// did store, or stored again below) answers twice; the second
			// reply finds no waiter.
			r := parseResult(reply.Header, reply.Data)
			var err error
			if r.Body, err = c.large.body(ctx, reply.Header, r.Body); err != nil {
				return Result{}, fmt.Errorf("mesh: submit to %s: %w", job, err)
			}
			c.large.drop(m.Header, reply.Header)
			return r, r.Err()
		case <-reconnected:
			reconnected = c.reconnects()
			if req.MsgID == "" {
				c.storeAgain(ctx, job, m, ch)
			}
		case <-ctx.Done():
			if errors.Is(ctx.Err(), context.Canceled) {
				c.cancel(job, m) // the caller went away: run it nowhere
			}
			return Result{}, ctx.Err()
		}
	}
}

// store stores req's work message m in job's work queue: with other
// requests in one message when it may be (see coalesce.go), else alone.
func (c *Client) store(ctx context.Context, job string, req Request, m *nats.Msg) (stored, error) {
	if co, size := c.coalescerOf(job, req, m); co != nil {
		return co.add(ctx, m, size)
	}
	return c.storeMsg(ctx, job, m, req.MsgID)
}

// storeMsg publishes m to a partition of job's work queue that answers:
// first the one msgID hashes to, else the next in round-robin. m gets a
// generated Nats-Msg-Id when msgID is "".
func (c *Client) storeMsg(ctx context.Context, job string, m *nats.Msg, msgID string) (stored, error) {
	n := c.parts.get(ctx, job)
	subjects := levelSubjects(job, n, levelOf(m.Header))
	first := c.route.next(n)
	if msgID != "" {
		first = firstPartition(msgID, n)
	} else {
		m.Header.Set(HeaderMsgID, nuid.Next())
	}
	st, err := c.route.publish(ctx, c.nc, c.js, subjects, first, m)
	if errors.Is(err, ErrQueueFull) {
		st, err = c.publishPurging(ctx, job, subjects, first, m, err)
	}
	return st, err
}

// fullPauses are the pauses of publishPurging between its rounds.
var fullPauses = []time.Duration{0, time.Millisecond, 5 * time.Millisecond, 20 * time.Millisecond, 50 * time.Millisecond}

// fullBackoff is how long a Client that found a job's work queue full of
// unanswered records refuses at once, without purging.
const fullBackoff = 100 * time.Millisecond

// publishPurging publishes m again after every partition refused it as
// full (err): the partitions' limits count records answered since their
// last purge (see purge.go), so it purges them and tries again, for a few
// rounds in case the acks of the answered ones are still on their way to
// the server. When the first round finds none answered the queue is full
// indeed: it returns err at once, and so does every publish to the job
// for the next fullBackoff, without asking the server again.
func (c *Client) publishPurging(ctx context.Context, job string, subjects []string, first int, m *nats.Msg, err error) (stored, error) {
	if until, ok := c.fullUntil.Load(job); ok && time.Now().Before(until.(time.Time)) {
		return stored{}, err
	}
	purged := false
	for _, pause := range fullPauses {
		if pause > 0 {
			select {
			case <-time.After(pause):
			case <-ctx.Done():
				return stored{}, err
			}
		}
		if !purgeFull(ctx, c.js, job, len(subjects)) {
			if !purged {
				break // nothing answered: full indeed, say so at once
			}
			continue // answered records whose acks are on their way
		}
		purged = true
		st, perr := c.route.publish(ctx, c.nc, c.js, subjects, first, m)
		if !errors.Is(perr, ErrQueueFull) {
			return st, perr
		}
		err = perr
	}
	if !purged {
		c.fullUntil.Store(job, time.Now().Add(fullBackoff))
	}
	return stored{}, err
}

// startPublish starts the producer span of a work message; workMsg injects
// its context into the message headers.
func (c *Client) startPublish(ctx context.Context, job string, req Request) (context.Context, trace.Span) {
	// A door that carries the caller's trace context only in headers (no
	// span in ctx) still joins the caller's trace.
	if !trace.SpanContextFromContext(ctx).IsValid() && len(req.Header) > 0 {
		ctx = telemetry.Extract(ctx, req.Header)
	}
	ctx, span := telemetry.Start(ctx, stageTracer, telemetry.SpanPublish, trace.SpanKindProducer)
	if span.IsRecording() {
		span.SetAttributes(telemetry.AttrMessagingSystem.String("nats"), telemetry.AttrMessagingDestination.String(WorkSubject(job)), telemetry.AttrJob.String(job))
		if req.URI != "" {
			span.SetAttributes(telemetry.AttrURI.String(req.URI))
		}
	}
	return ctx, span
}

// Enqueue publishes req to job's work queue for a durable door and waits
// for JetStream to store it; the worker publishes the result with a PubAck
// to resultSubject, which must lie under ResultsSubject(job, ...) (the
// worker maps it onto a results partition). Records that reach the Client
// while a store of the job is in flight go together in one work message
// (coalesce.go; EnqueueBatch hands over several at once). A duplicate
// MsgID is not an error: the first copy is already queued, or, within a
// batch, the result's MsgID makes the second copy's answer a duplicate. It returns ErrQueueFull,
// ErrInvalidJob, ErrInvalidConfig, status.ErrTooLarge, ErrUnavailable (503)
// when no partition stored it before ctx ended, or a publish error.
func (c *Client) Enqueue(ctx context.Context, job string, req Request, resultSubject string) error {
	if err := checkRequest(job, req); err != nil {
		return err
	}
	if !isResultsSubject(job, resultSubject) {
		return fmt.Errorf("%w: result subject %q not under %s", ErrInvalidConfig, resultSubject, ResultsSubject(job, ">"))
	}
	ctx, m, end, err := c.begin(ctx, job, req, Reply{ReplyDurable, resultSubject})
	if err != nil {
		return err
	}
	// A durable record waits in the queue as long as it must: ctx bounds
	// only this publish, not the record's life.
	m.Header.Del(HeaderDeadline)
	if _, err = c.store(ctx, job, req, m); err != nil {
		err = fmt.Errorf("mesh: enqueue to %s: %w", job, err)
	}
	end(err)
	return err
}

// begin starts a publish of req to job whose answer goes to r: the one
// publish path of Submit, Enqueue and Forward. It returns ctx bounded as
// withTimeout does, with the publish span, and the work message. end ends
// the span with the outcome and releases ctx. ErrClosed once Close was
// called.
func (c *Client) begin(ctx context.Context, job string, req Request, r Reply) (_ context.Context, _ *nats.Msg, end func(error), _ error) {
	c.mu.Lock()
	closed := c.closed
	c.mu.Unlock()
	if closed {
		return nil, nil, nil, ErrClosed
	}
	ctx, cancel := c.withTimeout(ctx)
	ctx, span := c.startPublish(ctx, job, req)
	m := workMsg(ctx, job, req)
	r.set(m.Header)
	finish := func(err error) { telemetry.EndSpan(span, err); cancel() }
	if err := c.large.offload(ctx, job, m); err != nil {
		finish(err)
		return nil, nil, nil, err
	}
	return ctx, m, finish, nil
}

// Forward stores req in job's work queue with its answer going straight
// from the worker to replyTo, a NATS caller's reply subject, as a micro
// reply (ReplyFormMicro): the NATS door's path. It returns once the
// request is stored; received is when the door took it. ctx's deadline
// bounds the store and becomes the request's deadline (Cs-Deadline), as
// in Submit. Errors are Submit's before the answer: ErrDuplicate,
// ErrQueueFull, ErrUnavailable, ErrClosed, status.ErrTooLarge.
//
// The door is not on the way back. That saves a request two of its ten
// crossings of NATS (the worker's reply to the door and the door's reply
// to the caller) and means a request, once stored, no longer depends on
// the door's process: a door killed after Forward returned loses nothing.
// The worker sees the ack of a record it answered confirmed, asking again
// while a NATS server is replaced, so that a record does not run (and
// answer its caller) twice because its ack was lost (see Worker.confirmAck).
func (c *Client) Forward(ctx context.Context, job string, req Request, replyTo string, received time.Time) error {
	if err := checkRequest(job, req); err != nil {
		return err
	}
	if replyTo == "" {
		return fmt.Errorf("%w: no reply subject to forward the answer to", ErrInvalidConfig)
	}
	ctx, m, end, err := c.begin(ctx, job, req, Reply{ReplyCaller, replyTo})
	if err != nil {
		return err
	}
	m.Header.Set(HeaderReceived, strconv.FormatInt(received.UnixNano(), 10))
	st, err := c.store(ctx, job, req, m)
	switch {
	case err != nil:
		err = fmt.Errorf("mesh: forward to %s: %w", job, err)
	case st.ack.Duplicate && !st.retried:
		// Another request with this id is queued; its caller gets the answer.
		err = fmt.Errorf("mesh: forward to %s: %w: %s", job, ErrDuplicate, req.MsgID)
	}
	end(err)
	return err
}

// Close unsubscribes the reply inbox and ends pending Submits with
// ErrClosed. It is idempotent and does not close the connection.
func (c *Client) Close() error {
	c.mu.Lock()
	if c.closed {
		c.mu.Unlock()
		return nil
	}
	c.closed = true
	c.forgetLocal()
	for id, ch := range c.pending {
		close(ch) // the waiting Submit returns ErrClosed
		delete(c.pending, id)
	}
	c.mu.Unlock()
	if err := c.sub.Unsubscribe(); err != nil && err != nats.ErrConnectionClosed && err != nats.ErrBadSubscription {
		return fmt.Errorf("mesh: close client: %w", err)
	}
	return nil
}

func (c *Client) withTimeout(ctx context.Context) (context.Context, context.CancelFunc) {
	if _, ok := ctx.Deadline(); ok {
		// Bounded already (every door bounds its requests): a ctx of our
		// own would cost a cancelCtx and a place in the parent's
		// children per request, and release nothing the caller does not.
		return ctx, func() {}
	}
	return context.WithTimeout(ctx, c.timeout)
}

// workMsg builds the work message for req; ctx must carry a deadline.
func workMsg(ctx context.Context, job string, req Request) *nats.Msg {
	m := nats.NewMsg(WorkSubject(job))
	m.Data = req.Body
	for k, v := range req.Header {
		m.Header[k] = v
	}
	for _, k := range []string{HeaderURI, HeaderContentType, HeaderReplyTo, HeaderReplyForm, HeaderReceived, HeaderResultTo, HeaderDeadline, HeaderStatus, HeaderError, HeaderBodyRef,
		HeaderPriority, HeaderQueueDeadline, HeaderQueueTimeout, HeaderTimeoutAction, HeaderAsked} {
		m.Header.Del(k)
	}
	req.Schedule.setHeaders(m.Header)
	ct := req.ContentType
	ct = cmp.Or(ct, DefaultContentType)
	m.Header.Set(HeaderContentType, ct)
	if req.URI != "" {
		m.Header.Set(HeaderURI, EncodeURI(req.URI)) // byte-exact: see uri.go
	}
	if req.MsgID != "" {
		m.Header.Set(HeaderMsgID, req.MsgID)
	}
	if dl, ok := ctx.Deadline(); ok {
		m.Header.Set(HeaderDeadline, strconv.FormatInt(dl.UnixNano(), 10))
	}
	telemetry.Inject(ctx, m.Header)
	return m
}

// drop deletes the objects named by the headers, in the background: a
// Submit's request and answer, once it has the answer.
func (b *bodies) drop(hs ...nats.Header) {
	var names []string
	for _, h := range hs {
		if h != nil && h.Get(HeaderBodyRef) != "" {
			names = append(names, h.Get(HeaderBodyRef))
		}
	}
	if len(names) == 0 {
		return
	}
	go func() {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		store, err := b.bucket(ctx, "")
		if err != nil {
			return
		}
		for _, name := range names {
			_ = store.Delete(ctx, name) // BodiesTTL removes what this misses
		}
	}()
}
