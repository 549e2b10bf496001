package mesh

import (
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"sync"
	"sync/atomic"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/micro"
	"github.com/nats-io/nuid"
)

// microService is the NATS door's micro service. It speaks nats.go
// micro's protocol: PING, INFO and STATS on $SRV.<VERB>[.<name>[.<id>]]
// answered with micro's own types (micro.Ping, micro.Info, micro.Stats),
// error replies in micro's headers, endpoints in a queue group; so
// `nats micro ls|info|stats` and micro clients see a micro service like
// any other.
//
// It is not micro.AddService because micro counts an endpoint's request,
// processing time and error when its handler returns, and reads the error
// from the reply the handler made. The door answers later, from a
// goroutine of its own, so that the subscription never waits for a
// worker: micro counted every request as a success of a few microseconds.
// Here a request is counted when its reply goes out, with the time since
// it arrived, and an error reply counts in num_errors and last_error
// ("<code>:<description>", as micro writes it).
//
// Safe for concurrent use; stop is idempotent.
type microService struct {
	nc *nats.Conn
	// more are further connections each endpoint subscribes on too, in
	// its queue group (ServiceConfig.Conns).
	more    []*nats.Conn
	ident   micro.ServiceIdentity
	desc    string
	started time.Time

	mu        sync.Mutex
	endpoints []*microEndpoint // stats guarded by mu
	verbSubs  []*nats.Subscription
	stopped   bool
}

type microEndpoint struct {
	info  micro.EndpointInfo
	stats micro.EndpointStats
	subs  []*nats.Subscription // one per connection
}

// addMicroService subscribes the PING, INFO and STATS subjects of service
// name (all services, the name, the name and the new instance id).
func addMicroService(nc *nats.Conn, name, version, desc string) (*microService, error) {
	s := &microService{
		nc:      nc,
		ident:   micro.ServiceIdentity{Name: name, ID: nuid.Next(), Version: version, Metadata: map[string]string{}},
		desc:    desc,
		started: time.Now().UTC(),
	}
	verbs := []struct {
		verb  micro.Verb
		value func() any
	}{
		{micro.PingVerb, func() any { return micro.Ping{ServiceIdentity: s.identity(), Type: micro.PingResponseType} }},
		{micro.InfoVerb, func() any { return s.info() }},
		{micro.StatsVerb, func() any { return s.stats() }},
	}
	for _, v := range verbs {
		for _, at := range [][2]string{{"", ""}, {name, ""}, {name, s.ident.ID}} {
			subj, err := micro.ControlSubject(v.verb, at[0], at[1])
			if err == nil {
				var sub *nats.Subscription
				sub, err = nc.Subscribe(subj, func(m *nats.Msg) {
					b, _ := json.Marshal(v.value())
					_ = m.Respond(b)
				})
				s.verbSubs = append(s.verbSubs, sub)
			}
			if err != nil {
				_ = s.stop(0)
				return nil, fmt.Errorf("subscribe %s: %w", v.verb, err)
			}
		}
	}
	return s, nil
}

// addEndpoint serves subject in queue group queue with h. h may answer
// after it returns, from any goroutine; the endpoint's stats count the
// request when it does.
func (s *microService) addEndpoint(name, subject, queue string, metadata map[string]string, h func(*microRequest)) error {
	e := &microEndpoint{
		info:  micro.EndpointInfo{Name: name, Subject: subject, QueueGroup: queue, Metadata: metadata},
		stats: micro.EndpointStats{Name: name, Subject: subject, QueueGroup: queue},
	}
	for _, nc := range append([]*nats.Conn{s.nc}, s.more...) {
		sub, err := nc.QueueSubscribe(subject, queue, func(m *nats.Msg) {
			h(&microRequest{msg: m, svc: s, ep: e, start: time.Now()})
		})
		if err != nil {
			for _, sub := range e.subs {
				_ = sub.Unsubscribe()
			}
			return err
		}
		e.subs = append(e.subs, sub)
	}
	s.mu.Lock()
	s.endpoints = append(s.endpoints, e)
	s.mu.Unlock()
	return nil
}

func (s *microService) identity() micro.ServiceIdentity {
	id := s.ident
	id.Metadata = maps.Clone(id.Metadata)
	return id
}

func (s *microService) info() micro.Info {
	s.mu.Lock()
	defer s.mu.Unlock()
	eps := make([]micro.EndpointInfo, len(s.endpoints))
	for i, e := range s.endpoints {
		eps[i] = e.info
		eps[i].Metadata = maps.Clone(e.info.Metadata)
	}
	return micro.Info{ServiceIdentity: s.identity(), Type: micro.InfoResponseType, Description: s.desc, Endpoints: eps}
}

func (s *microService) stats() micro.Stats {
	s.mu.Lock()
	defer s.mu.Unlock()
	eps := make([]*micro.EndpointStats, len(s.endpoints))
	for i, e := range s.endpoints {
		st := e.stats
		eps[i] = &st
	}
	return micro.Stats{ServiceIdentity: s.identity(), Type: micro.StatsResponseType, Started: s.started, Endpoints: eps}
}

// count records one answered request of e: err is the error reply (or
// the failure to send the reply), nil for a success.
func (s *microService) count(e *microEndpoint, took time.Duration, err error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	st := &e.stats
	st.NumRequests++
	st.ProcessingTime += took
	st.AverageProcessingTime = st.ProcessingTime / time.Duration(st.NumRequests)
	if err != nil {
		st.NumErrors++
		st.LastError = err.Error()
	}
}

// failed records that the reply of a request counted already could not be
// sent: its error is the last one, and counts as one unless the request
// was counted as an error reply already.
func (s *microService) failed(e *microEndpoint, err error, wasError bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	e.stats.LastError = err.Error()
	if !wasError {
		e.stats.NumErrors++
	}
}

// stop drains the endpoints, so that no new request reaches the handler,
// waits up to wait for the requests already delivered to reach it, and
// unsubscribes the PING, INFO and STATS subjects. A closed connection is
// not an error. Idempotent.
func (s *microService) stop(wait time.Duration) error {
	s.mu.Lock()
	if s.stopped {
		s.mu.Unlock()
		return nil
	}
	s.stopped = true
	eps, verbs := s.endpoints, s.verbSubs
	s.mu.Unlock()
	var errs []error
	var closed []<-chan nats.SubStatus
	for _, e := range eps {
		for _, sub := range e.subs {
			ch := sub.StatusChanged(nats.SubscriptionClosed)
			if err := sub.Drain(); err != nil {
				if !errors.Is(err, nats.ErrConnectionClosed) && !errors.Is(err, nats.ErrBadSubscription) {
					errs = append(errs, fmt.Errorf("drain %s: %w", e.info.Subject, err))
				}
				continue
			}
			closed = append(closed, ch)
		}
	}
	deadline := time.After(wait)
wait:
	for _, ch := range closed {
		select {
		case <-ch:
		case <-deadline:
			break wait
		}
	}
	for _, sub := range verbs {
		if sub == nil {
			continue
		}
		if err := sub.Unsubscribe(); err != nil && !errors.Is(err, nats.ErrConnectionClosed) && !errors.Is(err, nats.ErrBadSubscription) {
			errs = append(errs, fmt.Errorf("unsubscribe %s: %w", sub.Subject, err))
		}
	}
	return errors.Join(errs...)
}

// microRequest is a micro.Request whose reply, from whichever goroutine,
// is counted in its endpoint's stats; only the first reply counts.
type microRequest struct {
	msg     *nats.Msg
	svc     *microService
	ep      *microEndpoint
	start   time.Time
	counted atomic.Bool
}

var _ micro.Request = (*microRequest)(nil)

// done counts the request once, with err its error reply (nil: a
// success). It runs before the reply leaves, so that a caller who has its
// answer never reads $SRV.STATS without it; sent then reports a reply that
// could not be sent.
func (r *microRequest) done(err error) bool {
	if !r.counted.CompareAndSwap(false, true) {
		return false
	}
	r.svc.count(r.ep, time.Since(r.start), err)
	return true
}

// forwarded counts the request as a success now, without a reply: its
// answer goes from the worker straight to the caller (Client.Forward).
func (r *microRequest) forwarded() { r.done(nil) }

// sent records a reply that failed to go out (err) for a request done
// counted already (counted), as an error reply already when isErr.
func (r *microRequest) sent(counted, isErr bool, err error) {
	if counted && err != nil {
		r.svc.failed(r.ep, err, isErr)
	}
}

// Respond sends data as the reply.
func (r *microRequest) Respond(data []byte, opts ...micro.RespondOpt) error {
	m := &nats.Msg{Data: data}
	for _, opt := range opts {
		opt(m)
	}
	counted := r.done(nil)
	err := r.msg.RespondMsg(m)
	if err != nil {
		err = fmt.Errorf("%w: %s", micro.ErrRespond, err)
	}
	r.sent(counted, false, err)
	return err
}

// RespondJSON sends v, marshalled, as the reply.
func (r *microRequest) RespondJSON(v any, opts ...micro.RespondOpt) error {
	b, err := json.Marshal(v)
	if err != nil {
		return micro.ErrMarshalResponse
	}
	return r.Respond(b, opts...)
}

// Error sends an error reply: code and description in micro's headers,
// data as the body.
func (r *microRequest) Error(code, description string, data []byte, opts ...micro.RespondOpt) error {
	switch {
	case code == "":
		return fmt.Errorf("%w: error code", micro.ErrArgRequired)
	case description == "":
		return fmt.Errorf("%w: description", micro.ErrArgRequired)
	}
	m := &nats.Msg{Header: nats.Header{micro.ErrorHeader: {description}, micro.ErrorCodeHeader: {code}}}
	for _, opt := range opts {
		opt(m)
	}
	m.Data = data
	counted := r.done(fmt.Errorf("%s:%s", code, description))
	err := r.msg.RespondMsg(m)
	r.sent(counted, true, err)
	return err
}

func (r *microRequest) Data() []byte           { return r.msg.Data }
func (r *microRequest) Headers() micro.Headers { return micro.Headers(r.msg.Header) }
func (r *microRequest) Subject() string        { return r.msg.Subject }
func (r *microRequest) Reply() string          { return r.msg.Reply }
