package bench

import (
	"bufio"
	"bytes"
	"context"
	"fmt"
	"io"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/nats-io/nats.go"

	"github.com/cluster-serving/cluster-serving/mesh"
)

// loadResult is what one load run measured.
type loadResult struct {
	n       int
	errs    int
	elapsed time.Duration
	lat     []time.Duration
	lastErr error
}

func (r loadResult) rate() float64 { return float64(r.n) / r.elapsed.Seconds() }

func (r loadResult) pct(p float64) time.Duration {
	if len(r.lat) == 0 {
		return 0
	}
	slices.Sort(r.lat)
	return r.lat[min(len(r.lat)-1, int(p*float64(len(r.lat))))]
}

// op sends one request from load goroutine g and waits for its answer.
type op func(ctx context.Context, g int) error

// runLoad calls do from conc goroutines until d has passed or total
// requests were answered (total 0: no limit), timing each call.
func runLoad(conc int, d time.Duration, total int, do op) loadResult {
	ctx, cancel := context.WithTimeout(context.Background(), d)
	defer cancel()
	var (
		mu    sync.Mutex
		res   loadResult
		sent  atomic.Int64
		wg    sync.WaitGroup
		start = time.Now()
	)
	for g := range conc {
		wg.Add(1)
		go func() {
			defer wg.Done()
			var lat []time.Duration
			errs := 0
			var lastErr error
			for ctx.Err() == nil && (total == 0 || sent.Add(1) <= int64(total)) {
				t0 := time.Now()
				if err := do(ctx, g); err != nil {
					if ctx.Err() == nil {
						errs++
						lastErr = err
					}
					continue
				}
				lat = append(lat, time.Since(t0))
			}
			mu.Lock()
			res.lat = append(res.lat, lat...)
			res.errs += errs
			if lastErr != nil {
				res.lastErr = lastErr
			}
			mu.Unlock()
		}()
	}
	wg.Wait()
	res.elapsed = time.Since(start)
	res.n = len(res.lat)
	return res
}

// natsOp requests subject with body over a few connections.
func natsOp(url, subject string, body []byte) (op, func(), error) {
	const conns = 4
	ncs := make([]*nats.Conn, 0, conns)
	closeAll := func() {
		for _, nc := range ncs {
			nc.Close()
		}
	}
	for range conns {
		nc, err := nats.Connect(url)
		if err != nil {
			closeAll()
			return nil, nil, err
		}
		ncs = append(ncs, nc)
	}
	return func(ctx context.Context, g int) error {
		msg := nats.NewMsg(subject)
		msg.Data = body
		reply, err := ncs[g%conns].RequestMsgWithContext(ctx, msg)
		if err == nil && reply.Header.Get("Nats-Service-Error-Code") != "" {
			err = fmt.Errorf("%s: %s", reply.Header.Get("Nats-Service-Error-Code"), reply.Header.Get("Nats-Service-Error"))
		}
		return err
	}, closeAll, nil
}

// httpOp POSTs body to url with keep-alive connections.
func httpOp(url string, body []byte, conc int) op {
	return httpOpHeader(url, http.Header{"Content-Type": {mesh.DefaultContentType}}, body, conc)
}

// httpOpHeader POSTs body to url with header, on keep-alive connections.
func httpOpHeader(url string, header http.Header, body []byte, conc int) op {
	client := &http.Client{Transport: &http.Transport{MaxIdleConns: conc, MaxIdleConnsPerHost: conc}}
	return func(ctx context.Context, _ int) error {
		req, err := http.NewRequestWithContext(ctx, "POST", url, bytes.NewReader(body))
		if err != nil {
			return err
		}
		req.Header = header.Clone()
		resp, err := client.Do(req)
		if err != nil {
			return err
		}
		b, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if resp.StatusCode != http.StatusOK {
			return fmt.Errorf("HTTP %d: %.200s", resp.StatusCode, b)
		}
		return nil
	}
}

// trivialResponder answers every request on subject with its own body.
func trivialResponder(url, subject string) (func(), error) {
	nc, err := nats.Connect(url)
	if err != nil {
		return nil, err
	}
	if _, err := nc.Subscribe(subject, func(m *nats.Msg) { _ = m.Respond(m.Data) }); err != nil {
		nc.Close()
		return nil, err
	}
	if err := nc.Flush(); err != nil {
		nc.Close()
		return nil, err
	}
	return nc.Close, nil
}

// table prints load results as rows.
type table struct{ w io.Writer }

func (t table) header() {
	fmt.Fprintf(t.w, "%-44s %10s %10s %10s %7s\n", "path", "req/s", "p50", "p99", "errors")
}

func (t table) row(name string, r loadResult) {
	fmt.Fprintf(t.w, "%-44s %10.0f %10s %10s %7d\n", name, r.rate(), r.pct(0.50).Round(time.Microsecond), r.pct(0.99).Round(time.Microsecond), r.errs)
	if r.lastErr != nil {
		fmt.Fprintf(t.w, "   last error: %v\n", r.lastErr)
	}
}

// The Go runtime's counters that tinyAllocs reads from a process's
// /metrics (client_golang's Go collector).
const (
	mallocsMetric    = "go_memstats_mallocs_total"
	allocBytesMetric = "go_memstats_alloc_bytes_total"
)

// getMetrics GETs a Prometheus text endpoint; the caller closes the body.
func getMetrics(url string) (io.ReadCloser, error) {
	resp, err := http.Get(url)
	if err != nil {
		return nil, err
	}
	if resp.StatusCode != http.StatusOK {
		resp.Body.Close()
		return nil, fmt.Errorf("GET %s: %s", url, resp.Status)
	}
	return resp.Body, nil
}

// scrapeCounters reads mallocsMetric and allocBytesMetric from a
// Prometheus text endpoint.
func scrapeCounters(url string) (map[string]float64, error) {
	body, err := getMetrics(url)
	if err != nil {
		return nil, err
	}
	defer body.Close()
	got := map[string]float64{}
	sc := bufio.NewScanner(body)
	sc.Buffer(nil, 1<<20)
	for sc.Scan() {
		f := strings.Fields(sc.Text())
		if len(f) == 2 && (f[0] == mallocsMetric || f[0] == allocBytesMetric) {
			v, err := strconv.ParseFloat(f[1], 64)
			if err != nil {
				return nil, fmt.Errorf("%s: %w", f[0], err)
			}
			got[f[0]] = v
		}
	}
	if err := sc.Err(); err != nil {
		return nil, err
	}
	for _, m := range []string{mallocsMetric, allocBytesMetric} {
		if _, ok := got[m]; !ok {
			return nil, fmt.Errorf("%s has no %s", url, m)
		}
	}
	return got, nil
}
