package respdoor

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"

	"github.com/tidwall/redcon"
	"go.opentelemetry.io/otel"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/trace"

	"github.com/cluster-serving/cluster-serving/bridge/door"
	"github.com/cluster-serving/cluster-serving/bridge/redisdoor"
	"github.com/cluster-serving/cluster-serving/infer/status"
	"github.com/cluster-serving/cluster-serving/mesh"
	"github.com/cluster-serving/cluster-serving/telemetry"
)

var tracer = otel.Tracer(telemetry.ScopeName + "/bridge/respdoor")

// xadd is one parsed XADD: its job, the request, its entry id, or the
// error to answer instead.
type xadd struct {
	job string
	id  string
	req mesh.Request
	err string
}

// parseXADD reads XADD key [NOMKSTREAM] [MAXLEN|MINID [=|~] threshold
// [LIMIT count]] * field value [field value …]. Trimming options are
// accepted and ignored: the door never drops a stored record. Only *
// is taken as the id: the door assigns ids itself.
func (d *Door) parseXADD(args [][]byte) xadd {
	job, ok := d.job(args[1])
	if !ok {
		return xadd{err: d.noJob(args[1])}
	}
	i := 2
	for i < len(args) {
		switch strings.ToUpper(string(args[i])) {
		case "NOMKSTREAM":
			i++
			continue
		case "MAXLEN", "MINID":
			i++
			if i < len(args) && (string(args[i]) == "=" || string(args[i]) == "~") {
				i++
			}
			i++
			if i+1 < len(args) && strings.EqualFold(string(args[i]), "LIMIT") {
				i += 2
			}
			continue
		}
		break
	}
	switch {
	case i >= len(args):
		return xadd{err: "ERR syntax error"}
	case string(args[i]) != "*":
		return xadd{err: "ERR the cluster-serving RESP door assigns entry ids itself: use XADD " + job + " * uri <uri> data <data> ..."}
	case (len(args)-i-1)%2 != 0 || len(args)-i-1 == 0:
		return xadd{err: "ERR wrong number of arguments for 'xadd' command"}
	}
	values := make(map[string]any, (len(args)-i-1)/2)
	for j := i + 1; j+1 < len(args); j += 2 {
		values[string(args[j])] = string(args[j+1])
	}
	id := d.ids.next()
	// The process's own id keeps message ids apart across RESP door
	// processes and restarts; the entry id comes last, as the Redis
	// door's <job>:<entry id>, so that redisdoor.EntryTime reads it.
	req := redisdoor.EntryRequest(values, job+":resp-"+d.instance+":"+id)
	var err error
	if d.cfg.Queue != nil {
		req.Schedule, err = redisdoor.EntrySchedule(values, d.cfg.Queue(job))
	}
	switch {
	case err != nil:
		return xadd{err: "ERR " + err.Error()}
	case req.URI == "":
		return xadd{err: "ERR XADD needs a field 'uri' (the record's id, the last part of its result key " + redisdoor.ResultKey(job, "<uri>") + ")"}
	case len(req.URI) > mesh.MaxBucketURIBytes:
		return xadd{err: fmt.Sprintf("ERR uri longer than %d bytes: the RESP door keeps results under uris up to that length", mesh.MaxBucketURIBytes)}
	case len(req.Body) == 0:
		return xadd{err: "ERR XADD needs a field 'data' (base64 Arrow, or JSON instances with serde stream)"}
	}
	return xadd{job: job, id: id, req: req}
}

// xaddOne is one XADD.
func (d *Door) xaddOne(c redcon.Conn, _ *session, args [][]byte) {
	d.xadds(c, []redcon.Command{{Args: args}})
}

// xadds stores the records of cmds, XADDs pipelined together, those of
// one job in one mesh.Client.EnqueueBatch (in as few work messages as
// it can), and answers each in order: its entry id once JetStream holds
// the record, or an error. No id is given for a record that was not
// stored.
func (d *Door) xadds(c redcon.Conn, cmds []redcon.Command) {
	out := make([]xadd, len(cmds))
	byJob := map[string][]*xadd{}
	for i, cmd := range cmds {
		out[i] = d.parseXADD(cmd.Args)
		if out[i].err != "" {
			continue
		}
		if !d.inflight.begin() {
			out[i].err = "ERR the cluster-serving RESP door is shutting down: send it to another node"
			continue
		}
		byJob[out[i].job] = append(byJob[out[i].job], &out[i])
	}
	var wg sync.WaitGroup
	for job, xs := range byJob {
		store := func() {
			d.store(job, xs)
			for range xs {
				d.inflight.end()
			}
		}
		if len(byJob) == 1 {
			store() // the usual case: no goroutine (and its stack to grow) per XADD
			break
		}
		wg.Go(store)
	}
	wg.Wait()
	for _, x := range out {
		if x.err != "" {
			c.WriteError(x.err)
			continue
		}
		c.WriteBulkString(x.id)
	}
}

// store enqueues the records xs of job together within Timeout, each as
// the child of the span its traceparent field names (a server span the
// worker continues), and sets the error to answer of those not stored.
func (d *Door) store(job string, xs []*xadd) {
	sctx, cancel := context.WithTimeout(cmdContext(), d.cfg.Timeout)
	defer cancel()
	reqs := make([]mesh.Request, len(xs))
	spans := make([]trace.Span, len(xs))
	for i, x := range xs {
		xctx := telemetry.Extract(sctx, x.req.Header)
		xctx, spans[i] = telemetry.Start(xctx, tracer, telemetry.SpanDoorRESP, trace.SpanKindServer)
		if spans[i].IsRecording() {
			spans[i].SetAttributes(telemetry.AttrJob.String(job), attribute.String("messaging.message.id", x.id),
				telemetry.AttrURI.String(x.req.URI[:min(len(x.req.URI), 256)]))
		}
		reqs[i] = x.req
		redisdoor.CarrySpan(xctx, &reqs[i])
	}
	for i, err := range d.m.EnqueueBatch(sctx, job, reqs, mesh.ResultsSubject(job, DoorName)) {
		telemetry.EndSpan(spans[i], err)
		if err == nil {
			continue
		}
		st := status.Of(err)
		if st != status.BadInput && st != status.NotFound && st != status.TooLarge {
			d.cfg.Metrics.RecordRequest(sctx, telemetry.DoorRESP, job, telemetry.OutcomeRejected, 0)
		} else {
			d.cfg.Metrics.RecordRequest(sctx, telemetry.DoorRESP, job, telemetry.OutcomeBadInput, 0)
		}
		d.cfg.Metrics.RecordError(sctx, telemetry.DoorRESP, job, st, door.Message(err))
		xs[i].err = xaddError(job, err)
	}
}

// xaddError is the answer to an XADD whose record was not stored. A full
// queue is -OOM, as a Redis over maxmemory answers: the original client
// reports it as a full queue. A queue that did not answer in time is
// -BUSY; a record the mesh refuses (too large) is -ERR. redcon keeps an
// error reply on one line.
func xaddError(job string, err error) string {
	switch st := status.Of(err); {
	case errors.Is(err, mesh.ErrQueueFull):
		return "OOM the work queue of job " + job + " is full (queueMaxMsgs, queueMaxBytes): retry once the workers caught up"
	case errors.Is(err, mesh.ErrNoStorage):
		return "BUSY the work queue of job " + job + " is out of storage (NATS servers' disk full or max_file reached): retry"
	case st == status.BadInput || st == status.NotFound || st == status.TooLarge:
		return "ERR record refused: " + door.Message(err)
	case errors.Is(err, context.DeadlineExceeded):
		return "BUSY the work queue of job " + job + " did not store the record in time (NATS unreachable, electing a leader, or out of disk): retry"
	default:
		return "BUSY the work queue of job " + job + " is unavailable: " + door.Message(err) + ": retry"
	}
}
