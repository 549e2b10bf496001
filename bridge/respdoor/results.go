package respdoor

import (
	"context"
	"errors"
	"log/slog"

	"github.com/cluster-serving/cluster-serving/bridge/redisdoor"
	"github.com/cluster-serving/cluster-serving/mesh"
	"github.com/cluster-serving/cluster-serving/telemetry"
)

// putResults keeps a batch of job's results in its bucket, each under its
// uri with the value the Redis door would HSET (redisdoor.ResultValue),
// and returns once the bucket stored them all, or an error: then the
// batch is delivered again.
//
// A result is put with its record's message id as Nats-Msg-Id, and the
// delete marker of a DEL names the result it deletes, so a result
// delivered again (a door killed before its ack, a put that timed out, a
// worker's batch run again) after the client read and DELeted it does
// not come back as a stale copy, NATS restarts and leader changes
// included (mesh.ResultBucket.PutAsync): the stream's own dedupe and
// the marker the bucket keeps anyway, shared by every RESP door process
// of the job, where the Redis door needs a marker key per result. A
// result delivered again once the marker aged out of the bucket
// (respResultTTL) can come back once.
func (d *Door) putResults(ctx context.Context, job string, rs []mesh.Result) error {
	ctx, cancel := context.WithTimeout(ctx, d.cfg.Timeout)
	defer cancel()
	ctx, span := redisdoor.ResultSpan(ctx, tracer, telemetry.SpanResultPut, job, rs)
	waits := make([]func(context.Context) error, 0, len(rs))
	var err error
	for _, r := range rs {
		if r.URI == "" {
			continue // not ours to answer: no key to put
		}
		w, perr := d.buckets[job].PutAsync(r.URI, []byte(redisdoor.ResultValue(r)), r.Header.Get(mesh.HeaderMsgID))
		if errors.Is(perr, mesh.ErrBucketURI) {
			continue // XADD refuses such uris: not a record of this door
		}
		if perr != nil {
			err = perr
			break
		}
		waits = append(waits, w)
	}
	for _, w := range waits {
		if werr := w(ctx); werr != nil && err == nil {
			err = werr
		}
	}
	telemetry.EndSpan(span, err)
	if err != nil {
		d.lim.Log(ctx, slog.LevelWarn, "putting results; they wait in JetStream and are retried", err, "job", job, "results", len(rs))
		return err
	}
	redisdoor.RecordResults(ctx, d.cfg.Metrics, telemetry.DoorRESP, job, rs)
	return nil
}
