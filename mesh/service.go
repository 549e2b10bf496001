package mesh

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"runtime"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/cluster-serving/cluster-serving/infer/modelconfig"
	"github.com/cluster-serving/cluster-serving/infer/status"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/micro"
	"go.opentelemetry.io/otel/trace"

	"github.com/cluster-serving/cluster-serving/telemetry"
)

// Defaults applied by ServiceConfig for zero fields.
const (
	DefaultServiceVersion = "0.0.0"
	DefaultRequestTimeout = 30 * time.Second
	// DefaultMaxConcurrent is MaxConcurrent's floor: the default is
	// this or 256 per core (GOMAXPROCS), whichever is more.
	DefaultMaxConcurrent = 1024
)

// defaultMaxConcurrent sizes the door's in-flight bound from the cores:
// a request waiting for its store is a goroutine and its body, and how
// many can be stored at once grows with the cores serving them. A fixed
// 1,024 refused callers as busy on 16 cores with 6 idle (issue 23).
func defaultMaxConcurrent() int { return max(DefaultMaxConcurrent, 256*runtime.GOMAXPROCS(0)) }

// ServiceConfig configures a Service. The zero value, with Jobs set,
// means all defaults.
type ServiceConfig struct {
	// Jobs lists the jobs to serve; each gets endpoint "predict" on
	// serving.<job>.predict. Required.
	Jobs []string
	// Version is the micro service version (SemVer). Default 0.0.0.
	Version string
	// MaxConcurrent bounds requests the door is storing at once; beyond it
	// requests get micro error 503 "busy". Once stored, the work queue's
	// limits bound them (queueMaxMsgs: 503 "queue full"). Default 256
	// per core, at least DefaultMaxConcurrent (1024).
	MaxConcurrent int
	// RequestTimeout bounds storing each request and is its deadline
	// (Cs-Deadline): a worker answers 504 unrun once it has passed.
	// Default 30s.
	RequestTimeout time.Duration
	// Metrics counts requests at this door; nil records none.
	Metrics *telemetry.Metrics
	// Conns are further connections the endpoints subscribe on, in the
	// same queue group, so that the requests of a busy node arrive over
	// several connections, each read and handed over by its own
	// goroutine (one connection's read loop is one core). Optional;
	// the caller keeps ownership.
	Conns []*nats.Conn
	// Queue is the queue settings (priority levels, queue policy) of a
	// job's model, which a caller's Priority and Timeout headers are
	// placed in (ScheduleIn); nil: those headers are ignored.
	Queue func(job string) modelconfig.Queue
}

// Headers a NATS caller sets on a request: Triton's priority and
// timeout parameters (a priority level, 1 the highest; microseconds in
// the queue), honoured as the model's dynamic_batching allows.
const (
	HeaderCallerPriority = "Priority"
	HeaderCallerTimeout  = "Timeout"
)

// Validate reports the first invalid field, wrapping ErrInvalidConfig.
func (c ServiceConfig) Validate() error {
	if len(c.Jobs) == 0 {
		return fmt.Errorf("%w: Jobs is empty", ErrInvalidConfig)
	}
	seen := map[string]bool{}
	for _, j := range c.Jobs {
		if err := ValidateJob(j); err != nil {
			return fmt.Errorf("%w: Jobs: %w", ErrInvalidConfig, err)
		}
		if seen[j] {
			return fmt.Errorf("%w: Jobs: %q listed twice", ErrInvalidConfig, j)
		}
		seen[j] = true
	}
	return CheckLimits(ErrInvalidConfig, Limit{"MaxConcurrent", c.MaxConcurrent}, Limit{"RequestTimeout", c.RequestTimeout})
}

// ServiceQueueGroup is the queue group of the NATS door's endpoints. Every
// process that serves a job's door (start, http, bridge) joins it,
// so each request on serving.<job>.predict reaches exactly one of them and
// a process that stops leaves the others answering. It is micro's default
// group, named here because it is part of the wire contract: processes of
// one mesh that disagreed on it would each answer every request.
const ServiceQueueGroup = micro.DefaultQueueGroup

// errNoReply is the error a publish to a predict subject is counted
// with: it has no reply subject, so nobody could read its answer.
var errNoReply = errors.New("no reply subject: send a request, not a publish")

// Service is the NATS door: one instance of micro service
// "cluster-serving" with one "predict" endpoint per job, in queue group
// ServiceQueueGroup. It stores each request in the work queue with the
// caller's reply subject (Client.Forward), and the worker that runs it
// answers the caller: the door is not on the way back. Its $SRV.STATS count
// a request when it is stored or refused; a refusal (busy, queue full, a
// duplicate id, no reply subject) counts in num_errors (see microService);
// what workers answer is in their stats and metrics. Any number of
// processes may run it side by side. A request depends on the process that
// took it only until it is stored: one killed hard loses the requests it
// had not stored yet (their callers time out), one stopped gently stores
// them first. Each request is stored from its own goroutine so the
// subscription never blocks. Run it once; ID is safe for concurrent use.
type Service struct {
	nc  *nats.Conn
	c   *Client
	cfg ServiceConfig
	id  atomic.Pointer[string]
}

// NewService validates cfg. The caller keeps ownership of nc and c.
func NewService(nc *nats.Conn, c *Client, cfg ServiceConfig) (*Service, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	if c == nil {
		return nil, fmt.Errorf("%w: Client is nil", ErrInvalidConfig)
	}
	cfg.Version = cmp.Or(cfg.Version, DefaultServiceVersion)
	cfg.MaxConcurrent = cmp.Or(cfg.MaxConcurrent, defaultMaxConcurrent())
	cfg.RequestTimeout = cmp.Or(cfg.RequestTimeout, DefaultRequestTimeout)
	return &Service{nc: nc, c: c, cfg: cfg}, nil
}

// Run adds the micro service and serves until ctx ends, then drains the
// service and waits for requests in flight (each bounded by
// RequestTimeout). It returns an error only when the service cannot start.
func (s *Service) Run(ctx context.Context) error {
	svc, err := addMicroService(s.nc, ServiceName, s.cfg.Version, "cluster-serving inference")
	if err != nil {
		return fmt.Errorf("mesh: add service: %w", err)
	}
	svc.more = s.cfg.Conns
	// Requests in flight finish after ctx ends, bounded by RequestTimeout.
	base := context.WithoutCancel(ctx)
	sem := make(chan struct{}, s.cfg.MaxConcurrent)
	spawn := newSpawner(spawnerIdle)
	var wg sync.WaitGroup
	for _, job := range s.cfg.Jobs {
		h := func(req *microRequest) {
			select {
			case sem <- struct{}{}:
			default:
				const busy = "busy: too many requests in flight"
				s.cfg.Metrics.RecordAnswer(base, telemetry.DoorNATS, job, status.Busy, busy, 0)
				_ = req.Error(strconv.Itoa(status.Busy), busy, nil)
				return
			}
			wg.Add(1)
			spawn.run(func() {
				defer wg.Done()
				defer func() { <-sem }()
				s.serve(base, job, req)
			})
		}
		err := svc.addEndpoint(EndpointName, PredictSubject(job), ServiceQueueGroup, map[string]string{MetadataJob: job}, h)
		if err != nil {
			_ = svc.stop(0)
			return fmt.Errorf("mesh: add endpoint for %s: %w", job, err)
		}
	}
	defer s.cfg.Metrics.OpenDoor(telemetry.DoorNATS, predictSubjects(s.cfg.Jobs))()
	// The server has the subscriptions once a flush returns: from then on
	// ID says the door serves (a caller reaches it), not just that it asked.
	fctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	for _, nc := range append([]*nats.Conn{s.nc}, s.cfg.Conns...) {
		_ = nc.FlushWithContext(fctx)
	}
	cancel()
	id := svc.ident.ID
	s.id.Store(&id)
	<-ctx.Done()
	s.id.Store(nil)
	// Drains: no new requests reach the handlers, and those delivered
	// already do before wg.Wait.
	err = svc.stop(s.cfg.RequestTimeout)
	wg.Wait()
	if err != nil {
		return fmt.Errorf("mesh: stop service: %w", err)
	}
	return nil
}

// ID is this instance's micro service id once Run has added every
// endpoint and the server has them, until ctx ends; "" otherwise.
// $SRV.PING.cluster-serving.<ID> reaches this instance alone, where $SRV.PING.cluster-serving may be
// answered by any process of the mesh.
func (s *Service) ID() string {
	if p := s.id.Load(); p != nil {
		return *p
	}
	return ""
}

func (s *Service) serve(ctx context.Context, job string, req *microRequest) {
	start := req.start
	ctx, cancel := context.WithTimeout(ctx, s.cfg.RequestTimeout)
	defer cancel()
	hdr := req.Headers()
	// A caller's traceparent makes this door span its child.
	ctx = telemetry.Extract(ctx, nats.Header(hdr))
	ctx, span := telemetry.Start(ctx, tracer, telemetry.SpanDoorNATS, trace.SpanKindServer)
	if span.IsRecording() {
		span.SetAttributes(telemetry.AttrMessagingSystem.String("nats"), telemetry.AttrMessagingDestination.String(PredictSubject(job)), telemetry.AttrJob.String(job))
	}
	st, msg := status.OK, ""
	forwarded := false
	defer func() {
		endStatusSpan(span, st)
		if !forwarded {
			s.cfg.Metrics.RecordAnswer(ctx, telemetry.DoorNATS, job, st, msg, time.Since(start))
		}
	}()
	r := Request{
		ContentType: hdr.Get(HeaderContentTypeHTTP),
		Body:        req.Data(),
		URI:         hdr.Get(HeaderURI),
		MsgID:       hdr.Get(HeaderMsgID),
	}
	var err error
	if r.Schedule, err = s.schedule(job, hdr); err != nil {
		st, msg = status.BadInput, err.Error()
		_ = req.Error(strconv.Itoa(st), msg, nil)
		return
	}
	if req.Reply() == "" {
		// A publish, not a request: nobody could read the answer, so the
		// model does not run for it.
		st, msg = status.BadInput, errNoReply.Error()
		span.RecordError(errNoReply)
		req.done(fmt.Errorf("%d:%w", st, errNoReply))
		return
	}
	err = s.c.Forward(ctx, job, r, req.Reply(), start)
	if err == nil {
		// Stored: the worker answers the caller and records the request's
		// outcome in its metrics (Client.Forward); this door is done.
		forwarded = true
		req.forwarded()
		return
	}
	span.RecordError(err)
	st, msg = status.Of(err), err.Error()
	var we *status.Error
	switch {
	case errors.As(err, &we):
		msg = we.Message
	case errors.Is(err, ErrMaxQueueSize):
		msg = "Exceeds maximum queue size"
	case errors.Is(err, ErrQueueFull):
		msg = "queue full"
	case errors.Is(err, context.DeadlineExceeded):
		msg = "timed out queueing the request"
	}
	_ = req.Error(strconv.Itoa(st), msg, nil)
}

// schedule reads a caller's Priority and Timeout headers: a request
// without them, or a door without Queue, has the default schedule.
func (s *Service) schedule(job string, hdr micro.Headers) (Schedule, error) {
	p, t := hdr.Get(HeaderCallerPriority), hdr.Get(HeaderCallerTimeout)
	if s.cfg.Queue == nil || (p == "" && t == "") {
		return Schedule{}, nil
	}
	sched, err := ParseSchedule(s.cfg.Queue(job), p, t)
	if err != nil {
		return Schedule{}, fmt.Errorf("headers %s, %s: %w", HeaderCallerPriority, HeaderCallerTimeout, err)
	}
	return sched, nil
}
