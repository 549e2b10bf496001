package bench

import (
	"cmp"
	"fmt"
	"io"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/cluster-serving/cluster-serving/mesh"
	"github.com/cluster-serving/cluster-serving/telemetry"
)

// tinyBody is one request of the tiny model, add_f32.
var tinyBody = []byte(`{"instances":[{"x":[1.5,2.5,3.5,4.5]}]}`)

// tiny measures the doors on a tiny model (a few µs per call), where the
// mesh's own cost shows: the NATS door beside a trivial NATS responder on
// the same server and the HTTP door beside the NATS door (tinyDoors), then
// the NATS door with tracing off and on (tinyTracing).
func (r *runner) tiny(model string, d time.Duration) error {
	fmt.Fprintf(r.w, "== tiny model (%s), %s per run\n", filepath.Base(model), d)
	table{r.w}.header()
	if err := r.tinyDoors(model, d); err != nil {
		return err
	}
	return r.tinyTracing(model, d)
}

// tinyAllocs counts the heap allocations of the serving process per
// request through the NATS door at concurrency 32: the Go runtime's
// mallocs counter (go_memstats_mallocs_total, runtime.MemStats.Mallocs),
// scraped from its /metrics before and after one run, divided by the
// requests answered, less what one scrape of the idle process costs
// (the second scrape of the window). Metrics are on, as in the default
// config. It prints the process's peak RSS too.
func (r *runner) tinyAllocs(model string, d time.Duration) error {
	mp, err := freePort()
	if err != nil {
		return err
	}
	addr := fmt.Sprintf("127.0.0.1:%d", mp)
	c, err := r.startChild(model, map[string]string{"threadPerModel": "1", "metricsListen": addr})
	if err != nil {
		return err
	}
	defer c.stop()
	do, closeDo, err := natsOp(c.url, mesh.PredictSubject(c.job), tinyBody)
	if err != nil {
		return err
	}
	defer closeDo()
	// The warm-up sizes the run: a count, not a time, so that no request
	// is left in flight when the counters are read.
	warm := runLoad(32, d/4, 0, do)
	if err := c.waitIdle(time.Minute); err != nil {
		return err
	}
	total := max(1000, int(warm.rate()*d.Seconds()/2))
	m0, err := scrapeCounters("http://" + addr + "/metrics")
	if err != nil {
		return err
	}
	res := runLoad(32, 20*d, total, do)
	if err := c.waitIdle(time.Minute); err != nil {
		return err
	}
	m1, err := scrapeCounters("http://" + addr + "/metrics")
	if err != nil {
		return err
	}
	m2, err := scrapeCounters("http://" + addr + "/metrics") // what a scrape of the idle process costs
	if err != nil {
		return err
	}
	peak, err := c.peakRSSKiB()
	if err != nil {
		return err
	}
	if res.n == 0 {
		return fmt.Errorf("no request answered: %v", res.lastErr)
	}
	n := float64(res.n + res.errs)
	perReq := func(m string) float64 { return (m1[m] - m0[m] - (m2[m] - m1[m])) / n }
	fmt.Fprintf(r.w, "serving process, NATS door, concurrency 32, %d requests, %d errors (%.0f req/s, metrics on):\n", res.n, res.errs, res.rate())
	fmt.Fprintf(r.w, "  %.1f allocations and %.1f KiB allocated per request; peak RSS (VmHWM) %.1f MiB\n\n",
		perReq(mallocsMetric), perReq(allocBytesMetric)/1024, float64(peak)/1024)
	return nil
}

// tinyDoors loads one serving process through the NATS and HTTP doors and
// a trivial NATS responder on its server, at concurrency 32 and 1.
func (r *runner) tinyDoors(model string, d time.Duration) error {
	c, err := r.startChild(model, map[string]string{"threadPerModel": "1"})
	if err != nil {
		return err
	}
	defer c.stop()
	closeTrivial, err := trivialResponder(c.url, "bench.trivial")
	if err != nil {
		return err
	}
	defer closeTrivial()
	natsDo, closeNATS, err := natsOp(c.url, mesh.PredictSubject(c.job), tinyBody)
	if err != nil {
		return err
	}
	defer closeNATS()
	trivDo, closeTriv, err := natsOp(c.url, "bench.trivial", tinyBody)
	if err != nil {
		return err
	}
	defer closeTriv()
	closeStored, err := storedResponder(c.url)
	if err != nil {
		return err
	}
	defer closeStored()
	storedDo, closeStoredOp, err := natsOp(c.url, storedSubject, tinyBody)
	if err != nil {
		return err
	}
	defer closeStoredOp()
	storedURL, closeStoredHTTP, err := storedHTTPDoor(c.url)
	if err != nil {
		return err
	}
	defer closeStoredHTTP()
	storedHTTPDo := httpOp(storedURL, tinyBody, 32)
	httpDo := httpOp(c.httpURL+"/predict", tinyBody, 32)
	runLoad(8, time.Second, 500, natsDo) // warm-up
	runLoad(8, time.Second, 500, httpDo)
	runLoad(8, time.Second, 500, trivDo)
	runLoad(8, time.Second, 500, storedDo)
	storedCPU := snapCPU(c, nil)
	stored32 := runLoad(32, d, 0, storedDo)
	storedCPU2 := snapCPU(c, nil)
	runLoad(8, time.Second, 500, storedHTTPDo)
	storedHTTP32 := runLoad(32, d, 0, storedHTTPDo)
	var cpu [4]cpuSnap
	cpu[0] = snapCPU(c, nil)
	triv32 := runLoad(32, d, 0, trivDo)
	cpu[1] = snapCPU(c, nil)
	nats32 := runLoad(32, d, 0, natsDo)
	cpu[2] = snapCPU(c, nil)
	http32 := runLoad(32, d, 0, httpDo)
	cpu[3] = snapCPU(c, nil)
	triv1, nats1, http1 := runLoad(1, d/2, 0, trivDo), runLoad(1, d/2, 0, natsDo), runLoad(1, d/2, 0, httpDo)
	stored1 := runLoad(1, d/2, 0, storedDo)
	t := table{r.w}
	t.row("trivial NATS responder, concurrency 32", triv32)
	fmt.Fprintf(r.w, "  %s (the responder runs in the bench)\n", perRequest(cpu[0], cpu[1], triv32.n))
	t.row("trivial stored responder, concurrency 32", stored32)
	fmt.Fprintf(r.w, "  %s (its door and consumer run in the bench)\n", perRequest(storedCPU, storedCPU2, stored32.n))
	t.row("NATS door, concurrency 32", nats32)
	fmt.Fprintf(r.w, "  %s\n", perRequest(cpu[1], cpu[2], nats32.n))
	t.row("HTTP door /predict, concurrency 32", http32)
	fmt.Fprintf(r.w, "  %s\n", perRequest(cpu[2], cpu[3], http32.n))
	t.row("trivial NATS responder, concurrency 1", triv1)
	t.row("NATS door, concurrency 1", nats1)
	t.row("HTTP door /predict, concurrency 1", http1)
	t.row("trivial stored responder, concurrency 1", stored1)
	fmt.Fprintf(r.w, "trivial stored responder (door → JetStream file store → consumer answers the caller; no model, codec, metric or span)\n")
	fmt.Fprintf(r.w, "  / trivial responder: req/s at concurrency 32 %.3f, p50 at concurrency 1 %.2fx: the NATS door's ceiling on this server\n",
		stored32.rate()/triv32.rate(), float64(stored1.pct(0.5))/float64(triv1.pct(0.5)))
	fmt.Fprintf(r.w, "  NATS door / trivial stored responder: req/s at concurrency 32 %.3f, p50 at concurrency 1 %.2fx\n",
		nats32.rate()/stored32.rate(), float64(nats1.pct(0.5))/float64(stored1.pct(0.5)))
	t.row("trivial stored responder over HTTP, conc. 32", storedHTTP32)
	fmt.Fprintf(r.w, "  / trivial stored responder: %.3f (its door waits for the answer, as the HTTP door must): the HTTP door / NATS door ceiling\n",
		storedHTTP32.rate()/stored32.rate())
	fmt.Fprintf(r.w, "NATS door / trivial responder, req/s at concurrency 32: %.3f (target >= 0.5)\n", nats32.rate()/triv32.rate())
	fmt.Fprintf(r.w, "NATS door p50 / trivial p50 at concurrency 1:           %.2fx (target <= 1.5x)\n",
		float64(nats1.pct(0.5))/float64(triv1.pct(0.5)))
	fmt.Fprintf(r.w, "HTTP door / NATS door, req/s at concurrency 32:         %.3f (target >= 0.9)\n\n", http32.rate()/nats32.rate())
	return nil
}

// tracingSettings are the serving processes tinyTracing compares.
var tracingSettings = []struct{ name, ratio string }{
	{"NATS door, tracing off", ""},
	{"NATS door, tracing on, ratio 1.0 (OTLP)", "1.0"},
	{"NATS door, tracing on, ratio 0.01 (OTLP)", "0.01"},
}

// tinyTracing measures the cost of tracing: three processes, tracing off,
// on at ratio 1.0 and on at 0.01 (OTLP to a receiver on loopback), loaded
// in turn for `rounds` rounds so that the machine's drift hits all three
// alike; the median round of each counts.
func (r *runner) tinyTracing(model string, d time.Duration) error {
	recv, err := telemetry.StartReceiver("127.0.0.1:0", false)
	if err != nil {
		return err
	}
	defer recv.Close()
	dos := make([]op, len(tracingSettings))
	children := make([]*child, len(tracingSettings))
	for i, st := range tracingSettings {
		extra := map[string]string{"threadPerModel": "1"}
		if st.ratio != "" {
			extra["tracesExporter"] = "otlp-grpc"
			extra["otlpEndpoint"] = recv.Addr()
			extra["otlpInsecure"] = "true"
			extra["traceSampleRatio"] = st.ratio
		}
		c, err := r.startChild(model, extra)
		if err != nil {
			return err
		}
		defer c.stop()
		do, closeDo, err := natsOp(c.url, mesh.PredictSubject(c.job), tinyBody)
		if err != nil {
			return err
		}
		defer closeDo()
		runLoad(8, time.Second, 500, do) // warm-up
		dos[i], children[i] = do, c
	}
	// Seven short rounds, each setting's order turned every round, and
	// each round's own ratios: the rates of one round share the box's
	// state, and on 2 shared cores a process's rate moves ±10% from one
	// round to the next, which a ratio of two medians of 3 rounds did not
	// hide (0.01 ÷ off from 0.86 to 1.13 on the same build).
	const rounds = 7
	median, perRound, cpu := medianRounds(rounds, d/4, dos, children)
	fmt.Fprintf(r.w, "tracing cost: %d rounds of %s per setting, the settings' order turned each round; median round\n", rounds, d/4)
	t := table{r.w}
	t.header()
	for i, st := range tracingSettings {
		t.row(st.name, median[i])
		fmt.Fprintf(r.w, "  %s (all rounds; the bench's includes the OTLP receiver's)\n", cpu[i])
	}
	ratio := func(i int) (med, lo, hi float64) {
		rs := make([]float64, rounds)
		for k := range rounds {
			rs[k] = perRound[i][k].rate() / perRound[0][k].rate()
		}
		slices.Sort(rs)
		return rs[rounds/2], rs[0], rs[rounds-1]
	}
	m, lo, hi := ratio(1)
	fmt.Fprintf(r.w, "tracing ratio 1.0 / off:  %.3f (median of the rounds' ratios, %.3f-%.3f; target >= 0.85); spans received %d\n", m, lo, hi, recv.Count())
	m, lo, hi = ratio(2)
	fmt.Fprintf(r.w, "tracing ratio 0.01 / off: %.3f (median of the rounds' ratios, %.3f-%.3f; target >= 0.97)\n\n", m, lo, hi)
	return nil
}

// medianRounds loads each of dos in turn at concurrency 32 for d, rounds
// times, starting each round one setting further on, and returns each
// one's median round by rate, every round's result (perRound[i][k]: do i
// in round k), and the CPU per request of its serving process (cs[i]) and
// of this process over all its rounds.
func medianRounds(rounds int, d time.Duration, dos []op, cs []*child) (median []loadResult, perRound [][]loadResult, cpu []string) {
	perRound = make([][]loadResult, len(dos))
	for i := range perRound {
		perRound[i] = make([]loadResult, rounds)
	}
	spent := make([]cpuSnap, len(dos))
	counts := make([]int, len(dos))
	for k := range rounds {
		for j := range dos {
			i := (j + k) % len(dos)
			a := snapCPU(cs[i], nil)
			res := runLoad(32, d, 0, dos[i])
			b := snapCPU(cs[i], nil)
			perRound[i][k] = res
			spent[i].server += b.server - a.server
			spent[i].bench += b.bench - a.bench
			counts[i] += res.n
		}
	}
	cpu = make([]string, len(dos))
	for i := range dos {
		cpu[i] = perRequest(cpuSnap{}, spent[i], counts[i])
	}
	median = make([]loadResult, len(dos))
	for i := range perRound {
		sorted := slices.Clone(perRound[i])
		slices.SortFunc(sorted, func(a, b loadResult) int { return cmp.Compare(a.rate(), b.rate()) })
		median[i] = sorted[rounds/2]
	}
	return median, perRound, cpu
}

// resNetPath is one way a ResNet-50 request reaches the model.
type resNetPath struct {
	name   string
	binary bool // raw tensors end to end: the goal is higher
	do     op
}

// resNet measures the ResNet-50-shaped model through each door, JSON and
// binary, beside raw ONNX Runtime. One serving process serves every door.
// Raw ONNX Runtime runs for d/3 before each door's run of d and once after
// the last, in this process while the server idles: the baseline is the
// median of those runs, so the machine's drift over the part hits the
// baseline as it hits the doors, and their range is printed.
func (r *runner) resNet(model string, d time.Duration, batch, threads int, only string) error {
	w := r.w
	fmt.Fprintf(w, "== ResNet-50-shaped model, 3×224×224 float32, maxBatch %d, %d threads, %s per run\n", batch, threads, d)
	raw, err := newRawRunner(model, batch, threads, 224, 224)
	if err != nil {
		return err
	}
	defer raw.close()
	rs, err := startBenchRedis()
	if err != nil {
		return err
	}
	defer rs.stop()
	gp, err := freePort()
	if err != nil {
		return err
	}
	mp, err := freePort()
	if err != nil {
		return err
	}
	metricsURL := fmt.Sprintf("http://127.0.0.1:%d/metrics", mp)
	c, err := r.startChild(model, map[string]string{
		"threadPerModel": strconv.Itoa(threads), "modelParallelism": "1", "maxBatch": strconv.Itoa(batch),
		"redisUrl": rs.addr, "grpcPort": strconv.Itoa(gp), "metricsListen": fmt.Sprintf("127.0.0.1:%d", mp)})
	if err != nil {
		return err
	}
	defer c.stop()
	const input = "input"
	conc := 2 * batch
	jsonBody := imageRequest(input, 224, 224)
	img := imageTensor(224, 224)
	natsDo, closeNATS, err := natsOp(c.url, mesh.PredictSubject(c.job), jsonBody)
	if err != nil {
		return err
	}
	defer closeNATS()
	// The Redis clients poll as the original's Python client does.
	redisJSON, closeRJ := redisBackoffOp(rs.addr, c.job, jsonBody, "stream", time.Millisecond, conc)
	defer closeRJ()
	grpcDo, closeGRPC, err := grpcOp(fmt.Sprintf("127.0.0.1:%d", gp), c.job, input, img)
	if err != nil {
		return err
	}
	defer closeGRPC()
	binDo, err := oipBinaryOp(c.httpURL, c.job, input, img, conc)
	if err != nil {
		return err
	}
	arrowBody, err := arrowRecord(input, img)
	if err != nil {
		return err
	}
	redisArrow, closeRA := redisBackoffOp(rs.addr, c.job, arrowBody, "", time.Millisecond, conc)
	defer closeRA()
	paths := []resNetPath{
		{"NATS door, JSON", false, natsDo},
		{"HTTP door /predict, JSON", false, httpOp(c.httpURL+"/predict", jsonBody, conc)},
		{"Redis door, JSON (serde=stream)", false, redisJSON},
		{"gRPC door, raw_input_contents", true, grpcDo},
		{"HTTP door, OIP binary extension", true, binDo},
		{"Redis door, Arrow tensor", true, redisArrow},
	}
	if only != "" {
		paths = slices.DeleteFunc(paths, func(p resNetPath) bool {
			return !slices.ContainsFunc(strings.Split(only, ","), func(s string) bool { return strings.Contains(p.name, s) })
		})
	}
	for _, p := range paths { // warm-up, and a failing path fails here
		if res := runLoad(conc, max(d, time.Minute), conc, p.do); res.errs > 0 || res.n == 0 {
			return fmt.Errorf("%s: warm-up: %d of %d answered, last error %v", p.name, res.n, conc, res.lastErr)
		}
	}
	// A run stops with up to conc requests queued: each measurement
	// starts once the server has done them.
	if err := c.waitIdle(time.Minute); err != nil {
		return err
	}
	var (
		raws      []float64
		rawCPU    time.Duration // this process's CPU over the raw runs
		rawImages int
		results   = make([]loadResult, len(paths))
		usages    = make([]usage, len(paths))
	)
	runRaw := func() error {
		cpu0 := selfCPU()
		rate, n, err := raw.run(d / 3)
		rawCPU += selfCPU() - cpu0
		rawImages += n
		raws = append(raws, rate)
		return err
	}
	for i, p := range paths {
		if err := runRaw(); err != nil {
			return err
		}
		u0, err := c.readUsage(metricsURL, rs)
		if err != nil {
			return err
		}
		results[i] = runLoad(conc, d, 0, p.do)
		// The requests left queued finish before the usage is read: the
		// rows they add are as many as the run's first requests missed.
		if err := c.waitIdle(time.Minute); err != nil {
			return err
		}
		u1, err := c.readUsage(metricsURL, rs)
		if err != nil {
			return err
		}
		usages[i] = u1.sub(u0)
	}
	if err := runRaw(); err != nil {
		return err
	}
	// Path i ran between raw runs i and i+1: their mean is the baseline
	// nearest in time, for a machine whose load moves within the part.
	near := make([]float64, len(paths))
	for i := range paths {
		near[i] = (raws[i] + raws[i+1]) / 2
	}
	base := median(raws)
	fmt.Fprintf(w, "raw ONNX Runtime, batch %d: %.2f images/s, median of %d runs of %s between the doors' (min %.2f, max %.2f)\n",
		batch, base, len(raws), d/3, slices.Min(raws), slices.Max(raws))
	for i, p := range paths {
		target := 0.90
		if p.binary {
			target = 0.95
		}
		imagesRow(w, p.name, conc, results[i], base, target)
		fmt.Fprintf(w, "   / raw runs just before and after it (%.2f images/s): %.3f\n", near[i], results[i].rate()/near[i])
		usageRow(w, usages[i], results[i].n, results[i].elapsed, rawCPU/time.Duration(max(rawImages, 1)))
	}
	fmt.Fprintf(w, "(one image per request: %d KB of JSON; %d KB raw; %d KB of base64 Arrow)\n\n",
		len(jsonBody)/1024, 3*224*224*4/1024, len(arrowBody)/1024)
	return nil
}

// median is the middle of xs (the mean of the two middle ones for an
// even count); it sorts xs.
func median(xs []float64) float64 {
	slices.Sort(xs)
	n := len(xs)
	if n%2 == 1 {
		return xs[n/2]
	}
	return (xs[n/2-1] + xs[n/2]) / 2
}

// imagesRow prints a path's images/s beside raw ONNX Runtime's.
func imagesRow(w io.Writer, path string, conc int, res loadResult, raw, target float64) {
	fmt.Fprintf(w, "%-32s (concurrency %2d): %7.2f images/s  p50 %6s  errors %d  / raw %.3f (target >= %.2f)\n",
		path, conc, res.rate(), res.pct(0.5).Round(time.Millisecond), res.errs, res.rate()/raw, target)
	if res.lastErr != nil {
		fmt.Fprintf(w, "   last error: %v\n", res.lastErr)
	}
}
