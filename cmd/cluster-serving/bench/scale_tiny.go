package bench

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"slices"
	"strconv"
	"strings"
	"sync/atomic"
	"time"

	"google.golang.org/grpc/codes"
	grpcstatus "google.golang.org/grpc/status"

	"github.com/cluster-serving/cluster-serving/infer/infertest/freeport"
	"github.com/cluster-serving/cluster-serving/mesh"
	"github.com/cluster-serving/cluster-serving/mesh/serving"
)

// The ways a tiny row loads a layout: the trivial responder (a plain NATS
// echo on the layout's server, in the bench), the stored trivial
// responder (one JetStream message per request, no mesh code: the ceiling
// of any such design), and the doors.
const (
	wayTrivial = "trivial responder"
	wayStored  = "stored trivial"
	// wayStoredHTTP is the stored trivial responder's door over HTTP
	// (storedHTTPDoor): it waits for the answer as the HTTP door must,
	// the ceiling of the HTTP door's ratio to the NATS door.
	wayStoredHTTP = "stored trivial HTTP"
	wayNATS       = "NATS door"
	wayHTTP       = "HTTP door"
	wayGRPC       = "gRPC door"
)

// scaleLayout is one way to run the serving side: a `start` with keys,
// and workers more `cluster-serving worker` processes with the same keys
// joining its embedded NATS; ways are the rows measured on it. A row
// comparing a setting is one more layout with its key here.
type scaleLayout struct {
	name    string
	keys    map[string]string
	workers int
	ways    []string
}

// scaleLayouts are the layouts of the tiny rows.
func scaleLayouts(p scalePlan) []scaleLayout {
	base := map[string]string{"threadPerModel": "1"}
	with := func(k, v string) map[string]string {
		m := maps.Clone(base)
		m[k] = v
		return m
	}
	moreWays := []string{wayNATS, wayHTTP, wayGRPC}
	if p.quick {
		moreWays = moreWays[:1]
	}
	return []scaleLayout{
		{"start", base, 0, []string{wayTrivial, wayStored, wayStoredHTTP, wayNATS, wayHTTP, wayGRPC}},
		{"start, coalesce=1", with("coalesce", "1"), 0, []string{wayNATS}},            // each request its own stored message
		{"start, memory queue", with("queueStorage", "memory"), 0, []string{wayNATS}}, // the lever of a deployment that accepts losing queued work with the server
		{fmt.Sprintf("start + %d workers", p.extra), base, p.extra, moreWays},
		{fmt.Sprintf("start, %d partitions", p.partitions), with("jetstreamPartitions", strconv.Itoa(p.partitions)), 0, []string{wayNATS}},
	}
}

// scaleTiny measures every layout's rows at every concurrency of p.
func (r *runner) scaleTiny(p scalePlan) []scaleRow {
	t0 := time.Now()
	var rows []scaleRow
	for _, l := range scaleLayouts(p) {
		got, err := r.scaleLayoutRows(l, p, t0)
		if err != nil {
			r.progress(t0, "%s: %v", l.name, err)
			for _, way := range l.ways {
				rows = append(rows, scaleRow{layout: l.name, way: way, note: notMeasured(err)})
			}
			continue
		}
		rows = append(rows, got...)
	}
	return rows
}

// errUnknownKey: this binary's config does not know a layout's key.
var errUnknownKey = errors.New("key not known to this binary")

// notMeasured is a row's note for err.
func notMeasured(err error) string {
	if errors.Is(err, errUnknownKey) {
		return "n/a: " + errUnknownKey.Error()
	}
	return "n/a: " + strings.SplitN(err.Error(), "\n", 2)[0]
}

// checkKeys returns errUnknownKey when this binary's config parser
// (the children's: they are this binary) refuses one of keys as unknown.
func checkKeys(keys map[string]string) error {
	var cfg strings.Builder
	cfg.WriteString("modelPath: m\n")
	for k, v := range keys {
		fmt.Fprintf(&cfg, "%s: %s\n", k, v)
	}
	if _, err := serving.ParseFile([]byte(cfg.String())); err != nil && strings.Contains(err.Error(), "unknown key") {
		return fmt.Errorf("%w: %v", errUnknownKey, err)
	}
	return nil
}

// scaleLayoutRows starts layout l and measures its ways at every
// concurrency of p.
func (r *runner) scaleLayoutRows(l scaleLayout, p scalePlan, t0 time.Time) ([]scaleRow, error) {
	if err := checkKeys(l.keys); err != nil {
		return nil, err
	}
	var cs cleanups
	defer cs.run()
	keys, err := withGRPCPort(l)
	if err != nil {
		return nil, err
	}
	c, err := r.startChild(p.tiny, keys)
	if err != nil {
		return nil, err
	}
	cs.add(c.stop)
	workers := make([]*child, 0, l.workers)
	for range l.workers {
		w, err := r.startWorker(c, p.tiny, l.keys)
		if err != nil {
			return nil, err
		}
		cs.add(w.stop)
		workers = append(workers, w)
	}
	subjects, err := openResponders(c, l.ways, &cs)
	if err != nil {
		return nil, err
	}
	subjects[wayGRPC] = "127.0.0.1:" + keys["grpcPort"]
	var rows []scaleRow
	for _, conc := range p.conc {
		for _, way := range l.ways {
			row, err := measureWay(c, workers, way, subjects[way], conc, p.d)
			if err != nil {
				return nil, fmt.Errorf("%s, %d callers: %w", way, conc, err)
			}
			row.layout = l.name
			rows = append(rows, row)
			r.progress(t0, "%-24s %-19s %4d callers: %8.0f req/s, p99 %s, %d refused, %d other errors",
				l.name, way, conc, row.res.rate(), row.res.pct(0.99).Round(time.Microsecond), row.refused, row.otherErrors())
		}
	}
	return rows, nil
}

// withGRPCPort is l's keys, with a free grpcPort when one of its ways is
// the gRPC door's.
func withGRPCPort(l scaleLayout) (map[string]string, error) {
	if !slices.Contains(l.ways, wayGRPC) {
		return l.keys, nil
	}
	ports, err := freeport.Take(1)
	if err != nil {
		return nil, err
	}
	keys := maps.Clone(l.keys)
	keys["grpcPort"] = strconv.Itoa(ports[0])
	return keys, nil
}

// openResponders starts the responders ways need on c's server and
// returns the NATS subject of each NATS way ("" for HTTP).
func openResponders(c *child, ways []string, cs *cleanups) (map[string]string, error) {
	subjects := map[string]string{wayNATS: mesh.PredictSubject(c.job)}
	for _, way := range ways {
		switch way {
		case wayTrivial:
			closeTrivial, err := trivialResponder(c.url, "bench.trivial")
			if err != nil {
				return nil, err
			}
			cs.add(closeTrivial)
			subjects[way] = "bench.trivial"
		case wayStored:
			closeStored, err := storedResponder(c.url)
			if err != nil {
				return nil, err
			}
			cs.add(closeStored)
			subjects[way] = storedSubject
		case wayStoredHTTP: // after wayStored, whose stream and consumer it uses
			url, closeHTTP, err := storedHTTPDoor(c.url)
			if err != nil {
				return nil, err
			}
			cs.add(closeHTTP)
			subjects[way] = url
		}
	}
	return subjects, nil
}

// measureWay warms way up at conc callers, then runs it for d, counting
// refusals and the CPU of every process; it waits for the serving side
// to be idle again before it returns, so no row runs into the next.
func measureWay(c *child, workers []*child, way, subject string, conc int, d time.Duration) (scaleRow, error) {
	var do op
	switch way {
	case wayHTTP:
		do = httpOp(c.httpURL+"/predict", tinyBody, conc)
	case wayStoredHTTP:
		do = httpOp(subject, tinyBody, conc)
	case wayGRPC:
		// One connection per 32 callers, as the NATS ways.
		grpcDo, closeDo, err := grpcOpConns(subject, c.job, "x", tinyInput, max(4, conc/32))
		if err != nil {
			return scaleRow{}, err
		}
		defer closeDo()
		do = grpcDo
	default:
		spread, closeDo, err := spreadNATSOp(c.url, subject, tinyBody, conc)
		if err != nil {
			return scaleRow{}, err
		}
		defer closeDo()
		do = spread
	}
	var refused atomic.Int64
	counted := countRefusals(do, &refused)
	runLoad(conc, min(d/2, time.Second), 0, do) // warm-up: connections, the server's buffers
	if err := c.waitIdle(time.Minute); err != nil {
		return scaleRow{}, err
	}
	a := snapScale(c, workers)
	res := runLoad(conc, d, 0, counted)
	b := snapScale(c, workers)
	row := scaleRow{way: way, conc: conc, res: res, refused: int(refused.Load()), cpu: b.sub(a)}
	return row, c.waitIdle(time.Minute)
}

// spreadNATSOp requests subject with body over one NATS connection per
// 32 callers (natsOp opens 4; this opens conc/128 of them, at least one).
// A nats.Conn writes through one buffer under one lock and reads on one
// goroutine: with 512 callers on 4 connections the bench's own
// connections, not the serving side, would cap the rate on 16 cores.
func spreadNATSOp(url, subject string, body []byte, conc int) (op, func(), error) {
	k := max(1, (conc+127)/128)
	var cs cleanups
	ops := make([]op, 0, k)
	for range k {
		do, closeDo, err := natsOp(url, subject, body)
		if err != nil {
			cs.run()
			return nil, nil, err
		}
		cs.add(closeDo)
		ops = append(ops, do)
	}
	// Caller g uses connection g%4 of natsOp (g/4)%k: 32 callers each at conc 128k.
	return func(ctx context.Context, g int) error { return ops[(g/4)%k](ctx, g) }, cs.run, nil
}

// countRefusals is do, adding to n each refusal (a 503: busy, queue full)
// answered while ctx is live.
func countRefusals(do op, n *atomic.Int64) op {
	return func(ctx context.Context, g int) error {
		err := do(ctx, g)
		if err != nil && ctx.Err() == nil && isRefusal(err) {
			n.Add(1)
		}
		return err
	}
}

// isRefusal reports whether err is a door's 503 as natsOp ("503: …") and
// httpOp ("HTTP 503: …") report it, or the gRPC door's Unavailable.
func isRefusal(err error) bool {
	s := err.Error()
	return strings.HasPrefix(s, "503:") || strings.HasPrefix(s, "HTTP 503") || grpcstatus.Code(err) == codes.Unavailable
}
