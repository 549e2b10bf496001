package bench

import (
	"bufio"
	"fmt"
	"io"
	"strconv"
	"strings"
	"syscall"
	"time"
)

// usage is what one ResNet path cost, besides its rate: where a path
// loses against raw ONNX Runtime shows here, not in a rate that the
// machine's load moves by ±10%. A path whose batches are not full, or
// whose model sits idle between them, is starved; one whose CPU per image
// is above raw's pays for decoding, copies or its client (all on the same
// cores as ONNX Runtime).
type usage struct {
	batches, rows float64       // model runs, records in them
	busy          time.Duration // model runs' time, summed
	decode        time.Duration // decode stage, summed over records
	queueWait     time.Duration // time records spent stored, summed
	serverCPU     time.Duration // the serving process's user+system CPU
	benchCPU      time.Duration // this process's: the clients (the load, the Redis polls)
	redisCPU      time.Duration // redis-server's
}

// sub is u - v.
func (u usage) sub(v usage) usage {
	return usage{u.batches - v.batches, u.rows - v.rows, u.busy - v.busy, u.decode - v.decode,
		u.queueWait - v.queueWait, u.serverCPU - v.serverCPU, u.benchCPU - v.benchCPU, u.redisCPU - v.redisCPU}
}

// procCPU is process pid's user+system CPU so far.
func procCPU(pid int) (time.Duration, error) {
	ticks, err := cpuTicks(pid)
	return time.Duration(ticks) * 10 * time.Millisecond, err // USER_HZ
}

// selfCPU is this process's user+system CPU so far.
func selfCPU() time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// readUsage scrapes the serving process's batch and stage histograms from
// its /metrics (cluster_serving_batch_size, and the infer, decode and
// queue_wait stages of cluster_serving_stage_duration_seconds) and reads
// its CPU time, this process's and rs's.
func (c *child) readUsage(metricsURL string, rs *redisServer) (usage, error) {
	var u usage
	var err error
	if u.serverCPU, err = procCPU(c.cmd.Process.Pid); err != nil {
		return u, err
	}
	if u.redisCPU, err = procCPU(rs.cmd.Process.Pid); err != nil {
		return u, err
	}
	u.benchCPU = selfCPU()
	body, err := getMetrics(metricsURL)
	if err != nil {
		return u, err
	}
	defer body.Close()
	return u, parseUsage(body, &u)
}

// parseUsage adds the samples of Prometheus text r that usage counts.
func parseUsage(r io.Reader, u *usage) error {
	sc := bufio.NewScanner(r)
	sc.Buffer(nil, 1<<20)
	for sc.Scan() {
		line := sc.Text()
		if strings.HasPrefix(line, "#") {
			continue
		}
		sp := strings.LastIndexByte(line, ' ')
		if sp < 0 {
			continue
		}
		name, labels, _ := strings.Cut(line[:sp], "{")
		v, err := strconv.ParseFloat(line[sp+1:], 64)
		if err != nil {
			continue
		}
		secs := time.Duration(v * float64(time.Second))
		switch name {
		case "cluster_serving_batch_size_count":
			u.batches += v
		case "cluster_serving_batch_size_sum":
			u.rows += v
		case "cluster_serving_stage_duration_seconds_sum":
			switch {
			case strings.Contains(labels, `stage="infer"`):
				u.busy += secs
			case strings.Contains(labels, `stage="decode"`):
				u.decode += secs
			case strings.Contains(labels, `stage="queue_wait"`):
				u.queueWait += secs
			}
		}
	}
	return sc.Err()
}

// usageRow prints a path's usage over a run of elapsed that answered n
// images, beside raw ONNX Runtime's CPU per image (rawCPU).
func usageRow(w io.Writer, u usage, n int, elapsed time.Duration, rawCPU time.Duration) {
	if n == 0 || u.batches == 0 {
		fmt.Fprintf(w, "   (no usage: %d images, %.0f batches)\n", n, u.batches)
		return
	}
	per := func(d time.Duration) string { return fmt.Sprintf("%.1f", float64(d.Microseconds())/1000/float64(n)) }
	fmt.Fprintf(w, "   batch %.2f rows, model busy %.0f%%, decode %s ms, stored %s ms per image; CPU per image: server %s ms + clients %s ms + redis-server %s ms (raw %s ms)\n",
		u.rows/u.batches, 100*u.busy.Seconds()/elapsed.Seconds(), per(u.decode), per(u.queueWait),
		per(u.serverCPU), per(u.benchCPU), per(u.redisCPU), fmt.Sprintf("%.1f", float64(rawCPU.Microseconds())/1000))
}

// cpuSnap is the CPU used so far by the serving process, by redis-server
// when one runs, and by this process (the load's clients, and the trivial
// responder where one runs).
type cpuSnap struct{ server, redis, bench time.Duration }

// snapCPU reads c's, rs's (nil: none) and this process's CPU time.
func snapCPU(c *child, rs *redisServer) cpuSnap {
	var s cpuSnap
	s.server, _ = procCPU(c.cmd.Process.Pid) // 0 when unreadable
	if rs != nil {
		s.redis, _ = procCPU(rs.cmd.Process.Pid)
	}
	s.bench = selfCPU()
	return s
}

// perRequest says what each of n requests between snapshots a and b cost
// in CPU, process by process: where a ratio's limit lies when the cores
// are all in use.
func perRequest(a, b cpuSnap, n int) string {
	if n == 0 {
		return "no requests"
	}
	us := func(d time.Duration) float64 { return float64(d.Microseconds()) / float64(n) }
	s := fmt.Sprintf("CPU per request: serving process %.0f µs, bench clients %.0f µs", us(b.server-a.server), us(b.bench-a.bench))
	if b.redis > 0 {
		s += fmt.Sprintf(", redis-server %.0f µs", us(b.redis-a.redis))
	}
	return s
}

// cpuUse is the CPU that n requests cost, process by process.
type cpuUse struct {
	spent cpuSnap
	n     int
}

func (u cpuUse) String() string { return perRequest(cpuSnap{}, u.spent, u.n) }

// server is the serving process's CPU per request, in µs.
func (u cpuUse) server() float64 {
	return float64(u.spent.server.Microseconds()) / float64(max(u.n, 1))
}
