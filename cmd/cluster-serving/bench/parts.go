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

	"github.com/cluster-serving/cluster-serving/infer"
	"github.com/cluster-serving/cluster-serving/infer/infertest/freeport"
	"github.com/cluster-serving/cluster-serving/mesh"
	"github.com/cluster-serving/cluster-serving/telemetry"
)

// tinyBody is one request of the tiny model, add_f32.
var tinyBody = []byte(`{"instances":[{"x":[1.5,2.5,3.5,4.5]}]}`)

// tiny measures the doors on a tiny model (a few µs per call), where the
// mesh's own cost shows: the NATS door beside a trivial NATS responder on
// the same server and the HTTP and gRPC doors beside the NATS door, with
// the CPU each costs a request (tinyDoors), then
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
	mp, err := freeport.Take(1)
	if err != nil {
		return err
	}
	addr := fmt.Sprintf("127.0.0.1:%d", mp[0])
	c, do, closeChild, err := r.startNATSChild(model, map[string]string{"threadPerModel": "1", "metricsListen": addr})
	if err != nil {
		return err
	}
	defer closeChild()
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

// startNATSChild starts a serving process of model with extra keys and
// opens an op on its NATS door sending tinyBody; the func closes both.
func (r *runner) startNATSChild(model string, extra map[string]string) (*child, op, func(), error) {
	c, err := r.startChild(model, extra)
	if err != nil {
		return nil, nil, nil, err
	}
	do, closeDo, err := natsOp(c.url, mesh.PredictSubject(c.job), tinyBody)
	if err != nil {
		c.stop()
		return nil, nil, nil, err
	}
	return c, do, func() { closeDo(); c.stop() }, nil
}

// tinyDoors loads one serving process through its NATS, HTTP and gRPC
// doors and a trivial NATS responder on its server, at concurrency 32 and 1.
func (r *runner) tinyDoors(model string, d time.Duration) error {
	ports, err := freeport.Take(1)
	if err != nil {
		return err
	}
	c, err := r.startChild(model, map[string]string{"threadPerModel": "1", "grpcPort": strconv.Itoa(ports[0])})
	if err != nil {
		return err
	}
	defer c.stop()
	ops, closeOps, err := openTinyOps(c, fmt.Sprintf("127.0.0.1:%d", ports[0]))
	if err != nil {
		return err
	}
	defer closeOps()
	r.tinyReport(ops.measure(c, d))
	return nil
}

// tinyOps are the ways tinyDoors loads a serving process: its doors
// (tinyDoorWays, in that order), and the trivial and stored responders on
// its server.
type tinyOps struct {
	doors                    []op
	triv, stored, storedHTTP op
}

// tinyDoorWays name the doors of tinyOps, the NATS door first: each
// other's ratio is to it.
var tinyDoorWays = []string{"NATS door", "HTTP door /predict", "gRPC door, raw contents", "gRPC door, stream"}

// tinyInput is tinyBody's tensor, as the gRPC door's callers send it.
var tinyInput = infer.Tensor{DType: infer.Float32, Shape: []int64{1, 4}, Data: []float32{1.5, 2.5, 3.5, 4.5}}

// openTinyOps starts the trivial and stored responders on c's server and
// opens an op for each of tinyOps (grpcAddr: c's gRPC door); the func
// closes them all.
func openTinyOps(c *child, grpcAddr string) (tinyOps, func(), error) {
	var cs cleanups
	fail := func(err error) (tinyOps, func(), error) {
		cs.run()
		return tinyOps{}, nil, err
	}
	closeTrivial, err := trivialResponder(c.url, "bench.trivial")
	if err != nil {
		return fail(err)
	}
	cs.add(closeTrivial)
	var ops tinyOps
	natsDo, closeOp, err := natsOp(c.url, mesh.PredictSubject(c.job), tinyBody)
	if err != nil {
		return fail(err)
	}
	cs.add(closeOp)
	grpcDo, closeOp, err := grpcOp(grpcAddr, c.job, "x", tinyInput)
	if err != nil {
		return fail(err)
	}
	cs.add(closeOp)
	streamDo, closeOp, err := grpcStreamOp(grpcAddr, c.job, "x", tinyInput, 32)
	if err != nil {
		return fail(err)
	}
	cs.add(closeOp)
	ops.doors = []op{natsDo, httpOp(c.httpURL+"/predict", tinyBody, 32), grpcDo, streamDo}
	if ops.triv, closeOp, err = natsOp(c.url, "bench.trivial", tinyBody); err != nil {
		return fail(err)
	}
	cs.add(closeOp)
	closeStored, err := storedResponder(c.url)
	if err != nil {
		return fail(err)
	}
	cs.add(closeStored)
	if ops.stored, closeOp, err = natsOp(c.url, storedSubject, tinyBody); err != nil {
		return fail(err)
	}
	cs.add(closeOp)
	storedURL, closeStoredHTTP, err := storedHTTPDoor(c.url)
	if err != nil {
		return fail(err)
	}
	cs.add(closeStoredHTTP)
	ops.storedHTTP = httpOp(storedURL, tinyBody, 32)
	return ops, cs.run, nil
}

// tinyResults are tinyDoors' runs: the trivial and stored responders at
// concurrency 32 (with the CPU snapshots around them), the doors at 32 in
// rounds (doorRounds), and each way at concurrency 1.
type tinyResults struct {
	triv32, stored32, storedHTTP32 loadResult
	trivCPU, storedCPU             [2]cpuSnap
	doors                          doorRounds
	triv1, stored1                 loadResult
	doors1                         []loadResult
}

// doorRounds are the doors' runs at concurrency 32, in rounds with their
// order turned each round (medianRounds): the median round of each, every
// round, and each one's CPU over all its rounds.
type doorRounds struct {
	median   []loadResult
	perRound [][]loadResult
	cpu      []cpuUse
}

// doorRoundCount is how many rounds of d/4 tinyDoors loads each door for:
// on 2 shared cores a single run's rate moves ±10%.
const doorRoundCount = 5

// measure warms each way up, runs the responders at concurrency 32 for d
// and the doors in rounds, then each way at concurrency 1 for d/2.
func (ops tinyOps) measure(c *child, d time.Duration) (res tinyResults) {
	for _, do := range append([]op{ops.triv, ops.stored, ops.storedHTTP}, ops.doors...) {
		runLoad(8, time.Second, 500, do) // warm-up
	}
	res.storedCPU[0] = snapCPU(c, nil)
	res.stored32 = runLoad(32, d, 0, ops.stored)
	res.storedCPU[1] = snapCPU(c, nil)
	res.storedHTTP32 = runLoad(32, d, 0, ops.storedHTTP)
	res.trivCPU[0] = snapCPU(c, nil)
	res.triv32 = runLoad(32, d, 0, ops.triv)
	res.trivCPU[1] = snapCPU(c, nil)
	cs := make([]*child, len(ops.doors))
	for i := range cs {
		cs[i] = c
	}
	res.doors.median, res.doors.perRound, res.doors.cpu = medianRounds(doorRoundCount, d/4, ops.doors, cs)
	res.triv1, res.stored1 = runLoad(1, d/2, 0, ops.triv), runLoad(1, d/2, 0, ops.stored)
	for _, do := range ops.doors {
		res.doors1 = append(res.doors1, runLoad(1, d/2, 0, do))
	}
	return res
}

// tinyReport prints tinyDoors' rows and its ratios against their targets.
func (r *runner) tinyReport(res tinyResults) {
	t := table{r.w}
	t.row("trivial NATS responder, concurrency 32", res.triv32)
	fmt.Fprintf(r.w, "  %s (the responder runs in the bench)\n", perRequest(res.trivCPU[0], res.trivCPU[1], res.triv32.n))
	t.row("trivial stored responder, concurrency 32", res.stored32)
	fmt.Fprintf(r.w, "  %s (its door and consumer run in the bench)\n", perRequest(res.storedCPU[0], res.storedCPU[1], res.stored32.n))
	t.row("trivial stored responder over HTTP, conc. 32", res.storedHTTP32)
	fmt.Fprintf(r.w, "  / trivial stored responder: %.3f (its door waits for the answer, as the HTTP door must): the HTTP door / NATS door ceiling\n",
		res.storedHTTP32.rate()/res.stored32.rate())
	r.doorsReport(res.doors, 32)
	t.row("trivial NATS responder, concurrency 1", res.triv1)
	t.row("trivial stored responder, concurrency 1", res.stored1)
	for i, way := range tinyDoorWays {
		t.row(way+", concurrency 1", res.doors1[i])
	}
	nats32, nats1 := res.doors.median[0], res.doors1[0]
	fmt.Fprintf(r.w, "trivial stored responder (door → JetStream file store → consumer answers the caller; no model, codec, metric or span)\n")
	fmt.Fprintf(r.w, "  / trivial responder: req/s at concurrency 32 %.3f, p50 at concurrency 1 %.2fx: the NATS door's ceiling on this server\n",
		res.stored32.rate()/res.triv32.rate(), float64(res.stored1.pct(0.5))/float64(res.triv1.pct(0.5)))
	fmt.Fprintf(r.w, "  NATS door / trivial stored responder: req/s at concurrency 32 %.3f, p50 at concurrency 1 %.2fx\n",
		nats32.rate()/res.stored32.rate(), float64(nats1.pct(0.5))/float64(res.stored1.pct(0.5)))
	fmt.Fprintf(r.w, "NATS door / trivial responder, req/s at concurrency 32: %.3f (target >= 0.5)\n", nats32.rate()/res.triv32.rate())
	fmt.Fprintf(r.w, "NATS door p50 / trivial p50 at concurrency 1:           %.2fx (target <= 1.5x)\n\n",
		float64(nats1.pct(0.5))/float64(res.triv1.pct(0.5)))
}

// doorsReport prints each door's median round ("median") at concurrency conc beside
// the NATS door's (the first): its rate's ratio (the median of the
// rounds' ratios) and its serving process's CPU per request's.
func (r *runner) doorsReport(dr doorRounds, conc int) {
	t := table{r.w}
	for i, way := range tinyDoorWays {
		t.row(fmt.Sprintf("%s, conc. %d, median", way, conc), dr.median[i])
		fmt.Fprintf(r.w, "  %s\n", dr.cpu[i])
	}
	for i, way := range tinyDoorWays[1:] {
		m, lo, hi := roundRatios(dr.perRound, i+1, 0)
		fmt.Fprintf(r.w, "%s / NATS door at concurrency %d: req/s %.3f (rounds %.3f-%.3f; target >= 0.8 on 2 cores, 0.9 on 16), serving CPU per request %.2fx (target <= 1.2x)\n",
			way, conc, m, lo, hi, dr.cpu[i+1].server()/dr.cpu[0].server())
	}
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
		c, do, closeChild, err := r.startNATSChild(model, extra)
		if err != nil {
			return err
		}
		defer closeChild()
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
	m, lo, hi := roundRatios(perRound, 1, 0)
	fmt.Fprintf(r.w, "tracing ratio 1.0 / off:  %.3f (median of the rounds' ratios, %.3f-%.3f; target >= 0.85); spans received %d\n", m, lo, hi, recv.Count())
	m, lo, hi = roundRatios(perRound, 2, 0)
	fmt.Fprintf(r.w, "tracing ratio 0.01 / off: %.3f (median of the rounds' ratios, %.3f-%.3f; target >= 0.97)\n\n", m, lo, hi)
	return nil
}

// medianRounds loads each of dos in turn at concurrency 32 for d, rounds
// times, starting each round one setting further on, and returns each
// one's median round by rate, every round's result (perRound[i][k]: do i
// in round k), and the CPU per request of its serving process (cs[i]) and
// of this process over all its rounds.
func medianRounds(rounds int, d time.Duration, dos []op, cs []*child) (median []loadResult, perRound [][]loadResult, cpu []cpuUse) {
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
	cpu = make([]cpuUse, len(dos))
	for i := range dos {
		cpu[i] = cpuUse{spent[i], counts[i]}
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
	s, err := r.startResNetServer(model, rs, batch, threads)
	if err != nil {
		return err
	}
	defer s.c.stop()
	img := imageTensor(224, 224)
	jsonBody := imageRequest(resNetInput, 224, 224)
	arrowBody, err := arrowRecord(resNetInput, img)
	if err != nil {
		return err
	}
	conc := 2 * batch
	paths, closePaths, err := s.openPaths(rs, conc, img, jsonBody, arrowBody)
	if err != nil {
		return err
	}
	defer closePaths()
	if only != "" {
		paths = slices.DeleteFunc(paths, func(p resNetPath) bool {
			return !slices.ContainsFunc(strings.Split(only, ","), func(s string) bool { return strings.Contains(p.name, s) })
		})
	}
	runs, err := s.measure(raw, rs, paths, conc, d)
	if err != nil {
		return err
	}
	runs.report(w, paths, batch, conc, d)
	fmt.Fprintf(w, "(one image per request: %d KB of JSON; %d KB raw; %d KB of base64 Arrow)\n\n",
		len(jsonBody)/1024, 3*224*224*4/1024, len(arrowBody)/1024)
	return nil
}

// resNetInput is the ResNet-50-shaped model's input name.
const resNetInput = "input"

// resNetServer is the serving process resNet loads, with its gRPC door's
// port and its metrics' URL.
type resNetServer struct {
	c          *child
	grpcPort   int
	metricsURL string
}

// startResNetServer starts the serving process of resNet with every door
// on, its Redis door on rs.
func (r *runner) startResNetServer(model string, rs *redisServer, batch, threads int) (resNetServer, error) {
	ports, err := freeport.Take(2)
	if err != nil {
		return resNetServer{}, err
	}
	gp, mp := ports[0], ports[1]
	c, err := r.startChild(model, map[string]string{
		"threadPerModel": strconv.Itoa(threads), "modelParallelism": "1", "maxBatch": strconv.Itoa(batch),
		"redisUrl": rs.addr, "grpcPort": strconv.Itoa(gp), "metricsListen": fmt.Sprintf("127.0.0.1:%d", mp)})
	if err != nil {
		return resNetServer{}, err
	}
	return resNetServer{c: c, grpcPort: gp, metricsURL: fmt.Sprintf("http://127.0.0.1:%d/metrics", mp)}, nil
}

// openPaths opens an op for each door, JSON and binary (img as raw
// tensors, arrowBody as the Redis door's Arrow record); the func closes
// them all.
func (s resNetServer) openPaths(rs *redisServer, conc int, img infer.Tensor, jsonBody, arrowBody []byte) ([]resNetPath, func(), error) {
	var cs cleanups
	c := s.c
	natsDo, closeNATS, err := natsOp(c.url, mesh.PredictSubject(c.job), jsonBody)
	if err != nil {
		return nil, nil, err
	}
	cs.add(closeNATS)
	// The Redis clients poll as the original's Python client does.
	redisJSON, closeRJ := redisBackoffOp(rs.addr, c.job, jsonBody, "stream", time.Millisecond, conc)
	cs.add(closeRJ)
	grpcDo, closeGRPC, err := grpcOp(fmt.Sprintf("127.0.0.1:%d", s.grpcPort), c.job, resNetInput, img)
	if err != nil {
		cs.run()
		return nil, nil, err
	}
	cs.add(closeGRPC)
	binDo, err := oipBinaryOp(c.httpURL, c.job, resNetInput, img, conc)
	if err != nil {
		cs.run()
		return nil, nil, err
	}
	redisArrow, closeRA := redisBackoffOp(rs.addr, c.job, arrowBody, "", time.Millisecond, conc)
	cs.add(closeRA)
	return []resNetPath{
		{"NATS door, JSON", false, natsDo},
		{"HTTP door /predict, JSON", false, httpOp(c.httpURL+"/predict", jsonBody, conc)},
		{"Redis door, JSON (serde=stream)", false, redisJSON},
		{"gRPC door, raw_input_contents", true, grpcDo},
		{"HTTP door, OIP binary extension", true, binDo},
		{"Redis door, Arrow tensor", true, redisArrow},
	}, cs.run, nil
}

// resNetRuns are resNet's measurements: the raw runs' rates (one before
// each path's run and one after the last) and this process's CPU and
// images over them, and each path's result and serving usage.
type resNetRuns struct {
	raws      []float64
	rawCPU    time.Duration
	rawImages int
	results   []loadResult
	usages    []usage
}

// measure warms every path up (a failing path fails here), then runs raw
// ONNX Runtime for d/3 before each path's run of d at concurrency conc and
// once after the last.
func (s resNetServer) measure(raw *rawRunner, rs *redisServer, paths []resNetPath, conc int, d time.Duration) (*resNetRuns, error) {
	for _, p := range paths {
		if res := runLoad(conc, max(d, time.Minute), conc, p.do); res.errs > 0 || res.n == 0 {
			return nil, fmt.Errorf("%s: warm-up: %d of %d answered, last error %v", p.name, res.n, conc, res.lastErr)
		}
	}
	// A run stops with up to conc requests queued: each measurement
	// starts once the server has done them.
	if err := s.c.waitIdle(time.Minute); err != nil {
		return nil, err
	}
	runs := &resNetRuns{results: make([]loadResult, len(paths)), usages: make([]usage, len(paths))}
	for i, p := range paths {
		if err := runs.runRaw(raw, d/3); err != nil {
			return nil, err
		}
		u0, err := s.c.readUsage(s.metricsURL, rs)
		if err != nil {
			return nil, err
		}
		runs.results[i] = runLoad(conc, d, 0, p.do)
		// The requests left queued finish before the usage is read: the
		// rows they add are as many as the run's first requests missed.
		if err := s.c.waitIdle(time.Minute); err != nil {
			return nil, err
		}
		u1, err := s.c.readUsage(s.metricsURL, rs)
		if err != nil {
			return nil, err
		}
		runs.usages[i] = u1.sub(u0)
	}
	return runs, runs.runRaw(raw, d/3)
}

// runRaw runs raw ONNX Runtime for d and adds its rate, CPU and images.
func (runs *resNetRuns) runRaw(raw *rawRunner, d time.Duration) error {
	cpu0 := selfCPU()
	rate, n, err := raw.run(d)
	runs.rawCPU += selfCPU() - cpu0
	runs.rawImages += n
	runs.raws = append(runs.raws, rate)
	return err
}

// report prints the raw baseline and each path's row beside it.
func (runs *resNetRuns) report(w io.Writer, paths []resNetPath, batch, conc int, d time.Duration) {
	raws := runs.raws
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
		imagesRow(w, p.name, conc, runs.results[i], base, target)
		fmt.Fprintf(w, "   / raw runs just before and after it (%.2f images/s): %.3f\n", near[i], runs.results[i].rate()/near[i])
		usageRow(w, runs.usages[i], runs.results[i].n, runs.results[i].elapsed, runs.rawCPU/time.Duration(max(runs.rawImages, 1)))
	}
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
