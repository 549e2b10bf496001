package bench

import (
	"cmp"
	"fmt"
	"io"
	"path/filepath"
	"slices"
	"strconv"
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
	httpDo := httpOp(c.httpURL+"/predict", tinyBody, 32)
	runLoad(8, time.Second, 500, natsDo) // warm-up
	runLoad(8, time.Second, 500, httpDo)
	runLoad(8, time.Second, 500, trivDo)
	triv32, nats32, http32 := runLoad(32, d, 0, trivDo), runLoad(32, d, 0, natsDo), runLoad(32, d, 0, httpDo)
	triv1, nats1, http1 := runLoad(1, d/2, 0, trivDo), runLoad(1, d/2, 0, natsDo), runLoad(1, d/2, 0, httpDo)
	t := table{r.w}
	t.row("trivial NATS responder, concurrency 32", triv32)
	t.row("NATS door, concurrency 32", nats32)
	t.row("HTTP door /predict, concurrency 32", http32)
	t.row("trivial NATS responder, concurrency 1", triv1)
	t.row("NATS door, concurrency 1", nats1)
	t.row("HTTP door /predict, concurrency 1", http1)
	fmt.Fprintf(r.w, "NATS door / trivial responder, req/s at concurrency 32: %.3f (issue 2 target >= 0.5)\n", nats32.rate()/triv32.rate())
	fmt.Fprintf(r.w, "NATS door p50 / trivial p50 at concurrency 1:        %.2fx (issue 2 target <= 3x)\n",
		float64(nats1.pct(0.5))/float64(triv1.pct(0.5)))
	fmt.Fprintf(r.w, "HTTP door / NATS door, req/s at concurrency 32:      %.3f (issue 4 target >= 0.7)\n\n", http32.rate()/nats32.rate())
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
		dos[i] = do
	}
	const rounds = 3
	median := medianRounds(rounds, d/2, dos)
	fmt.Fprintf(r.w, "tracing cost: %d rounds of %s per setting, median round\n", rounds, d/2)
	t := table{r.w}
	t.header()
	for i, st := range tracingSettings {
		t.row(st.name, median[i])
	}
	fmt.Fprintf(r.w, "tracing ratio 1.0 / off:  %.3f (issue 5 target >= 0.85); spans received %d\n", median[1].rate()/median[0].rate(), recv.Count())
	fmt.Fprintf(r.w, "tracing ratio 0.01 / off: %.3f (issue 5 target >= 0.97)\n\n", median[2].rate()/median[0].rate())
	return nil
}

// medianRounds loads each of dos in turn at concurrency 32 for d, rounds
// times, and returns each one's median round by rate.
func medianRounds(rounds int, d time.Duration, dos []op) []loadResult {
	runs := make([][]loadResult, len(dos))
	for range rounds {
		for i, do := range dos {
			runs[i] = append(runs[i], runLoad(32, d, 0, do))
		}
	}
	median := make([]loadResult, len(dos))
	for i := range runs {
		slices.SortFunc(runs[i], func(a, b loadResult) int { return cmp.Compare(a.rate(), b.rate()) })
		median[i] = runs[i][rounds/2]
	}
	return median
}

// resNet measures the ResNet-50-shaped model through each door beside raw
// ONNX Runtime.
func (r *runner) resNet(model string, d time.Duration, batch, threads int) error {
	w := r.w
	fmt.Fprintf(w, "== ResNet-50-shaped model, 3×224×224 float32, maxBatch %d, %d threads, %s per run\n", batch, threads, d)
	raw, err := rawThroughput(model, batch, threads, 224, 224, d)
	if err != nil {
		return err
	}
	c, err := r.startChild(model, map[string]string{
		"threadPerModel": strconv.Itoa(threads), "modelParallelism": "1", "maxBatch": strconv.Itoa(batch)})
	if err != nil {
		return err
	}
	defer c.stop()
	body := imageRequest("input", 224, 224)
	conc := 2 * batch
	natsDo, closeNATS, err := natsOp(c.url, mesh.PredictSubject(c.job), body)
	if err != nil {
		return err
	}
	defer closeNATS()
	httpDo := httpOp(c.httpURL+"/predict", body, conc)
	runLoad(conc, d/2, 0, natsDo) // warm-up
	viaNATS := runLoad(conc, d, 0, natsDo)
	viaHTTP := runLoad(conc, d, 0, httpDo)
	fmt.Fprintf(w, "raw ONNX Runtime, batch %d:   %8.2f images/s\n", batch, raw)
	imagesRow(w, "NATS door", conc, viaNATS, raw)
	imagesRow(w, "HTTP door", conc, viaHTTP, raw)
	c.stop()
	if err := r.redisResNet(model, d, batch, threads, raw); err != nil {
		return fmt.Errorf("redis door: %w", err)
	}
	fmt.Fprintf(w, "(request body %d KB of JSON, decoded on the worker)\n\n", len(body)/1024)
	return nil
}

// imagesRow prints a door's images/s beside raw ONNX Runtime's.
func imagesRow(w io.Writer, door string, conc int, res loadResult, raw float64) {
	fmt.Fprintf(w, "%-10s (concurrency %2d): %8.2f images/s  p50 %s  errors %d  ratio to raw %.3f (target >= 0.95)\n",
		door, conc, res.rate(), res.pct(0.5).Round(time.Millisecond), res.errs, res.rate()/raw)
	if res.lastErr != nil {
		fmt.Fprintf(w, "   last error: %v\n", res.lastErr)
	}
}
