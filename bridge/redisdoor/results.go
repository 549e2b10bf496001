package redisdoor

import (
	"context"
	"log/slog"

	"github.com/cluster-serving/cluster-serving/infer/status"

	goredis "github.com/redis/go-redis/v9"

	"github.com/cluster-serving/cluster-serving/mesh"
	"github.com/cluster-serving/cluster-serving/telemetry"
)

// writeOnce HSETs each result of a batch unless its marker says it was
// written already, and sets the marker, in one step. A door killed after
// its HSET but before its ack reached JetStream gets the result again
// (after mesh.ResultsAckWait, or when it restarts); the client may have
// read and deleted the key meanwhile, and a second HSET would bring it
// back as a duplicate. The marker lives writtenTTL. KEYS are pairs:
// result hash, marker; ARGV[1] the field, ARGV[2] the ttl in seconds,
// then one value per pair. One call writes a whole batch: a call per
// result cost Redis a script lookup and a Lua call each. EVAL, not
// EVALSHA: a restarted Redis has no script cache, and in a pipeline
// go-redis cannot fall back.
var writeOnce = goredis.NewScript(`
local n = 0
for i = 1, #KEYS, 2 do
  if redis.call('SET', KEYS[i+1], '1', 'NX', 'EX', ARGV[2]) then
    redis.call('HSET', KEYS[i], ARGV[1], ARGV[2 + (i+1)/2])
    n = n + 1
  end
end
return n`)

// maxWriteOnce bounds the results of one writeOnce call, so that one call
// holds Redis (single-threaded) for a short while only.
const maxWriteOnce = 64

// writtenTTL is how long a result's marker lives: JetStream's dedupe
// window. A result redelivered later than that (a door dead for longer)
// can be written twice. Each marker costs Redis about 100 bytes.
const writtenTTL = mesh.DuplicateWindow

// ResultValue is the value of a result's hash field (SPEC §2): the
// result's body (base64 Arrow, or topN text) when it succeeded, NaN when
// the record failed. The RESP door keeps the same bytes.
func ResultValue(r mesh.Result) string {
	if r.Status == status.OK {
		return string(r.Body)
	}
	return NaN
}

// WrittenKey is the marker of a written result, by its record's message
// id: cluster-serving-written:<msgid>. It does not match the result keys'
// pattern cluster-serving_<job>:*, which clients list with KEYS.
func WrittenKey(msgID string) string { return "cluster-serving-written:" + msgID }

// writeResults HSETs a batch of results in one pipeline.
func (d *Door) writeResults(ctx context.Context, rs []mesh.Result) error {
	ctx, cancel := context.WithTimeout(ctx, d.cfg.Timeout)
	defer cancel()
	pipe := d.rdb.Pipeline()
	n := 0
	var keys []string
	args := []any{ResultField, int(writtenTTL.Seconds())}
	flush := func() {
		if len(keys) > 0 {
			writeOnce.Eval(ctx, pipe, keys, args...)
			keys, args = nil, args[:2:2]
		}
	}
	for _, r := range rs {
		if r.URI == "" {
			continue // not ours to answer: no key to write
		}
		v := ResultValue(r)
		if r.Status != status.OK {
			d.lim.Log(ctx, slog.LevelWarn, "record answered NaN", r.Err(), "uri", logURI(r.URI))
		}
		if id := r.Header.Get(mesh.HeaderMsgID); id != "" {
			// Once per record, even when a door killed before its ack
			// gets the result again: see writeOnce.
			keys = append(keys, ResultKey(d.cfg.Job, r.URI), WrittenKey(id))
			args = append(args, v)
			if len(keys) == 2*maxWriteOnce {
				flush()
			}
		} else {
			pipe.HSet(ctx, ResultKey(d.cfg.Job, r.URI), ResultField, v)
		}
		n++
	}
	flush()
	if n == 0 {
		return nil
	}
	ctx, span := d.writeSpan(ctx, rs)
	_, err := pipe.Exec(ctx)
	telemetry.EndSpan(span, err)
	if err != nil {
		// Redis full or away: the results stay in JetStream and come back.
		d.writeFailing.Store(true)
		d.lim.Log(ctx, slog.LevelWarn, "writing results; they wait in JetStream and are retried", err, "results", n)
		return err
	}
	d.recordResults(ctx, rs)
	if d.writeFailing.Swap(false) {
		d.log.Info("writing results again")
	}
	d.written.Add(int64(n))
	return nil
}
