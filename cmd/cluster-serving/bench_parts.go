package main

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

// benchTiny measures the doors on a tiny model (a few µs per call), where
// the mesh's own cost shows: the NATS door beside a trivial NATS
// responder on the same server, the HTTP door beside the NATS door, and
// the NATS door with tracing off, on at ratio 1.0 (exporting to an OTLP
// receiver on loopback) and on at ratio 0.01.
func benchTiny(w io.Writer, bin, model string, d time.Duration) error {
	body := []byte(`{"instances":[{"x":[1.5,2.5,3.5,4.5]}]}`)
	t := table{w}
	fmt.Fprintf(w, "== tiny model (%s), %s per run\n", filepath.Base(model), d)
	t.header()

	c, err := startChild(bin, model, map[string]string{"threadPerModel": "1"})
	if err != nil {
		return err
	}
	closeTrivial, err := trivialResponder(c.url, "bench.trivial")
	if err != nil {
		c.stop()
		return err
	}
	natsDo, closeNATS, err := natsOp(c.url, mesh.PredictSubject(c.job), body)
	if err != nil {
		closeTrivial()
		c.stop()
		return err
	}
	trivDo, closeTriv, err := natsOp(c.url, "bench.trivial", body)
	if err != nil {
		closeNATS()
		closeTrivial()
		c.stop()
		return err
	}
	httpDo := httpOp(c.httpURL+"/predict", body, 32)
	runLoad(8, time.Second, 500, natsDo) // warm-up
	runLoad(8, time.Second, 500, httpDo)
	runLoad(8, time.Second, 500, trivDo)
	triv32 := runLoad(32, d, 0, trivDo)
	nats32 := runLoad(32, d, 0, natsDo)
	http32 := runLoad(32, d, 0, httpDo)
	triv1 := runLoad(1, d/2, 0, trivDo)
	nats1 := runLoad(1, d/2, 0, natsDo)
	http1 := runLoad(1, d/2, 0, httpDo)
	closeTriv()
	closeNATS()
	closeTrivial()
	c.stop()
	t.row("trivial NATS responder, concurrency 32", triv32)
	t.row("NATS door, concurrency 32", nats32)
	t.row("HTTP door /predict, concurrency 32", http32)
	t.row("trivial NATS responder, concurrency 1", triv1)
	t.row("NATS door, concurrency 1", nats1)
	t.row("HTTP door /predict, concurrency 1", http1)
	fmt.Fprintf(w, "NATS door / trivial responder, req/s at concurrency 32: %.3f (issue 2 target >= 0.5)\n", nats32.rate()/triv32.rate())
	fmt.Fprintf(w, "NATS door p50 / trivial p50 at concurrency 1:        %.2fx (issue 2 target <= 3x)\n",
		float64(nats1.pct(0.5))/float64(triv1.pct(0.5)))
	fmt.Fprintf(w, "HTTP door / NATS door, req/s at concurrency 32:      %.3f (issue 4 target >= 0.7)\n\n", http32.rate()/nats32.rate())

	// Tracing cost: three processes, tracing off, on at ratio 1.0 and on
	// at 0.01 (OTLP to a receiver on loopback), loaded in turn for
	// `rounds` rounds so that the machine's drift hits all three alike;
	// the median round of each counts.
	recv, err := telemetry.StartReceiver("127.0.0.1:0", false)
	if err != nil {
		return err
	}
	defer recv.Close()
	settings := []struct{ name, ratio string }{
		{"NATS door, tracing off", ""},
		{"NATS door, tracing on, ratio 1.0 (OTLP)", "1.0"},
		{"NATS door, tracing on, ratio 0.01 (OTLP)", "0.01"},
	}
	dos := make([]op, len(settings))
	for i, st := range settings {
		extra := map[string]string{"threadPerModel": "1"}
		if st.ratio != "" {
			extra["tracesExporter"] = "otlp-grpc"
			extra["otlpEndpoint"] = recv.Addr()
			extra["otlpInsecure"] = "true"
			extra["traceSampleRatio"] = st.ratio
		}
		c, err := startChild(bin, model, extra)
		if err != nil {
			return err
		}
		defer c.stop()
		do, closeDo, err := natsOp(c.url, mesh.PredictSubject(c.job), body)
		if err != nil {
			return err
		}
		defer closeDo()
		runLoad(8, time.Second, 500, do) // warm-up
		dos[i] = do
	}
	const rounds = 3
	runs := make([][]loadResult, len(settings))
	for range rounds {
		for i, do := range dos {
			runs[i] = append(runs[i], runLoad(32, d/2, 0, do))
		}
	}
	median := make([]loadResult, len(settings))
	for i := range runs {
		slices.SortFunc(runs[i], func(a, b loadResult) int { return cmp.Compare(a.rate(), b.rate()) })
		median[i] = runs[i][rounds/2]
	}
	fmt.Fprintf(w, "tracing cost: %d rounds of %s per setting, median round\n", rounds, d/2)
	t.header()
	for i, st := range settings {
		t.row(st.name, median[i])
	}
	fmt.Fprintf(w, "tracing ratio 1.0 / off:  %.3f (issue 5 target >= 0.85); spans received %d\n", median[1].rate()/median[0].rate(), recv.Count())
	fmt.Fprintf(w, "tracing ratio 0.01 / off: %.3f (issue 5 target >= 0.97)\n\n", median[2].rate()/median[0].rate())
	return nil
}

func benchResNet(w io.Writer, bin, model string, d time.Duration, batch, threads int) error {
	fmt.Fprintf(w, "== ResNet-50-shaped model, 3×224×224 float32, maxBatch %d, %d threads, %s per run\n", batch, threads, d)
	raw, err := rawThroughput(model, batch, threads, 224, 224, d)
	if err != nil {
		return err
	}
	c, err := startChild(bin, model, map[string]string{
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
	for _, r := range []struct {
		name string
		res  loadResult
	}{{"NATS door", viaNATS}, {"HTTP door", viaHTTP}} {
		fmt.Fprintf(w, "%-10s (concurrency %2d): %8.2f images/s  p50 %s  errors %d  ratio to raw %.3f (target >= 0.95)\n",
			r.name, conc, r.res.rate(), r.res.pct(0.5).Round(time.Millisecond), r.res.errs, r.res.rate()/raw)
		if r.res.lastErr != nil {
			fmt.Fprintf(w, "   last error: %v\n", r.res.lastErr)
		}
	}
	c.stop()
	if err := benchRedisResNet(w, bin, model, d, batch, threads, raw); err != nil {
		return fmt.Errorf("redis door: %w", err)
	}
	fmt.Fprintf(w, "(request body %d KB of JSON, decoded on the worker)\n\n", len(body)/1024)
	return nil
}
