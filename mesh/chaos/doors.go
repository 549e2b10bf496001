package chaos

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"strconv"
	"strings"
	"time"

	"github.com/nats-io/nats.go"
	goredis "github.com/redis/go-redis/v9"
)

// retryPause is how long a client waits before it sends again after a
// refusal (503, no responders, connection refused, Redis OOM).
const retryPause = 100 * time.Millisecond

// doNATS publishes r to serving.<job>.predict with the reply subject
// inbox.<id> and waits; silence for AttemptTimeout sends it again.
func (l *Load) doNATS(r *Request, deadline time.Time) {
	body := l.c.opt.Calc.Body(r.ID)
	if r.Garbage {
		body = garbageBody(r.ID)
	}
	msg := &nats.Msg{Subject: "serving." + l.c.Job + ".predict", Reply: l.inbox + "." + strconv.FormatInt(r.ID, 10), Data: body}
	ch := l.wait(r.ID)
	for first := true; time.Now().Before(deadline); first = false {
		if !first {
			time.Sleep(retryPause)
		}
		if err := l.nc.PublishMsg(msg); err != nil {
			continue
		}
		timer := time.NewTimer(min(l.cfg.AttemptTimeout, time.Until(deadline)))
		select {
		case a := <-ch:
			timer.Stop()
			if a.noResponders || a.status == 503 {
				l.busy(r)
				continue
			}
			l.settle(r, a)
			return
		case <-timer.C:
			l.resent(r)
		}
	}
}

// onNATSReply reads every answer on the client's inbox, so that a second
// answer to one request is seen even after its sender has moved on.
func (l *Load) onNATSReply(msg *nats.Msg) {
	id, err := strconv.ParseInt(msg.Subject[strings.LastIndexByte(msg.Subject, '.')+1:], 10, 64)
	if err != nil {
		return
	}
	l.natsHeard.Store(time.Now().UnixNano())
	if msg.Header.Get("Status") == "503" && len(msg.Data) == 0 {
		l.route(id, answer{noResponders: true})
		return
	}
	status := 200
	if code := msg.Header.Get("Nats-Service-Error-Code"); code != "" {
		status, _ = strconv.Atoi(code)
	}
	l.judge(id, status, msg.Data, msg.Header.Get("Nats-Service-Error"))
}

// judge decides whether an answer of the NATS or HTTP door is right for
// request id, counts it and hands it to the sender.
func (l *Load) judge(id int64, status int, body []byte, desc string) {
	l.mu.Lock()
	r := l.byID[id]
	l.mu.Unlock()
	if r == nil {
		return
	}
	a := answer{status: status, err: desc}
	switch {
	case r.Garbage && status == 400:
		l.right(id)
	case r.Garbage:
		a.err = fmt.Sprintf("garbage answered %d: %.200s", status, body)
	case status == 200:
		if err := l.c.opt.Calc.Check(id, body); err != nil {
			a = answer{status: -1, err: err.Error()}
			break
		}
		l.right(id)
	}
	l.route(id, a)
}

// doHTTP posts r to /predict until an answer other than 503 comes, or the
// deadline passes. A broken connection (the door died) is tried again: a
// real client retries, and HTTP can show no second answer.
func (l *Load) doHTTP(r *Request, deadline time.Time) {
	body := l.c.opt.Calc.Body(r.ID)
	if r.Garbage {
		body = garbageBody(r.ID)
	}
	ch := l.wait(r.ID)
	for first := true; time.Now().Before(deadline); first = false {
		if !first {
			time.Sleep(retryPause)
		}
		status, resp, err := l.post(body, deadline)
		if err != nil {
			l.resent(r)
			continue
		}
		if status == 503 {
			l.busy(r)
			continue
		}
		l.judge(r.ID, status, resp, string(resp))
		select {
		case a := <-ch:
			l.settle(r, a)
		default:
		}
		return
	}
}

func (l *Load) post(body []byte, deadline time.Time) (int, []byte, error) {
	ctx, cancel := context.WithDeadline(context.Background(), deadline)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, l.c.HTTPURL+"/predict", bytes.NewReader(body))
	if err != nil {
		return 0, nil, err
	}
	req.Header.Set("Content-Type", "application/json")
	resp, err := l.hc.Do(req)
	if err != nil {
		return 0, nil, err
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	return resp.StatusCode, b, err
}

// redisURI names request id in the Redis door: g-<id> or junk-<id>.
func redisURI(r *Request) string {
	if r.Garbage {
		return "junk-" + strconv.FormatInt(r.ID, 10)
	}
	return "g-" + strconv.FormatInt(r.ID, 10)
}

// redisOf is the client of a Redis-protocol door (DoorRedis, DoorRESP)
// and whether the server it talks to runs now.
func (l *Load) redisOf(d Door) (*goredis.Client, func() bool) {
	if d == DoorRESP {
		return l.resp, l.c.RESP.Alive
	}
	return l.rdb, l.c.Redis.Alive
}

// doRedis adds r to the job's stream through its door (redis-server or
// the RESP door) and waits for the poller to see its result. The XADD is
// repeated only when it surely was not taken: the server was down, the
// dial failed, or it answered OOM (a full queue).
func (l *Load) doRedis(r *Request, deadline time.Time) {
	rdb, alive := l.redisOf(r.Door)
	values := []any{"uri", redisURI(r), "data", string(l.c.opt.Calc.Body(r.ID)), "serde", "stream"}
	if r.Garbage {
		values = []any{"uri", redisURI(r), "data", "!! not base64 arrow !!"}
	}
	ch := l.wait(r.ID)
	for first := true; ; first = false {
		if !time.Now().Before(deadline) {
			return
		}
		if !first {
			time.Sleep(retryPause)
		}
		// A command sent while no redis-server process runs cannot have
		// been taken, whatever error the dead connection gives back.
		down := !alive()
		ctx, cancel := context.WithDeadline(context.Background(), deadline)
		err := rdb.XAdd(ctx, &goredis.XAddArgs{Stream: l.c.Job, Values: values}).Err()
		cancel()
		if err == nil {
			break
		}
		if strings.HasPrefix(err.Error(), "OOM") {
			l.busy(r)
			continue
		}
		if !down && !refused(err) {
			l.mu.Lock()
			r.Unsure, r.Err = true, err.Error()
			l.mu.Unlock()
			break
		}
	}
	select {
	case a := <-ch:
		l.settle(r, a)
	case <-time.After(time.Until(deadline)):
	}
}

// refused says whether a Redis command surely never reached a server:
// the dial failed or the pool had no connection.
func refused(err error) bool {
	var op *net.OpError
	return (errors.As(err, &op) && op.Op == "dial") || errors.Is(err, goredis.ErrPoolTimeout)
}

// pollRedis reads the results of door d (DoorRedis, DoorRESP) as the
// Python clients do (KEYS, then HGET and DEL), every 10 ms until ctx
// ends. A key that comes back after it was read and deleted is a
// duplicate result, and counted as one.
func (l *Load) pollRedis(ctx context.Context, d Door) {
	rdb, _ := l.redisOf(d)
	every(ctx, 10*time.Millisecond, func() { l.readResults(ctx, rdb, d) })
}

// readResults reads and deletes every result key door d has.
func (l *Load) readResults(ctx context.Context, rdb *goredis.Client, d Door) {
	prefix := "cluster-serving_" + l.c.Job + ":"
	keys, err := rdb.Keys(ctx, prefix+"*").Result()
	if err != nil || len(keys) == 0 {
		return
	}
	vals := make([]*goredis.StringCmd, len(keys))
	_, _ = rdb.Pipelined(ctx, func(p goredis.Pipeliner) error {
		for i, k := range keys {
			vals[i] = p.HGet(ctx, k, "value")
			p.Del(ctx, k)
		}
		return nil
	})
	for i, k := range keys {
		if v, err := vals[i].Result(); err == nil {
			l.redisResult(d, strings.TrimPrefix(k, prefix), v)
		}
	}
}

// redisResult judges one result value read under uri at door d.
func (l *Load) redisResult(d Door, uri, v string) {
	kind, num, _ := strings.Cut(uri, "-")
	id, err := strconv.ParseInt(num, 10, 64)
	l.mu.Lock()
	r := l.byID[id]
	if err != nil || r == nil || r.Garbage != (kind == "junk") || r.Door != d {
		l.strays++
		l.mu.Unlock()
		return
	}
	l.mu.Unlock()
	switch {
	case r.Garbage && v == "NaN":
		l.right(id)
		l.route(id, answer{status: 400})
	case r.Garbage:
		l.route(id, answer{status: -1, err: fmt.Sprintf("garbage answered %.100q", v)})
	case v == l.c.opt.Calc.WantRedis(id):
		l.right(id)
		l.route(id, answer{status: 200})
	case v == "NaN":
		l.route(id, answer{status: 500, err: "NaN"})
	default:
		l.route(id, answer{status: -1, err: fmt.Sprintf("wrong result %.100q", v)})
	}
}
