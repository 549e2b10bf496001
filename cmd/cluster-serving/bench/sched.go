package bench

import (
	"fmt"
	"runtime"
	"time"
)

// The models of the scheduling part: the tiny model three times, with
// dynamic_batching alike, so that each pair differs by one feature.
const (
	schedPlain = "tiny"       // dynamic_batching, nothing more
	schedQueue = "tiny_queue" // priority levels and a queue policy, every request at the default
	schedCache = "tiny_cache" // response_cache on
)

// schedRepo is the scheduling part's repository.
func schedRepo(tiny string) []repoModel {
	const batching = "max_batch_size: 8\ndynamic_batching { }\n"
	return []repoModel{
		{schedPlain, copyTo(tiny), batching},
		{schedQueue, copyTo(tiny), "max_batch_size: 8\ndynamic_batching { priority_levels: 2 default_priority_level: 2 " +
			"default_queue_policy { max_queue_size: 100000 default_timeout_microseconds: 60000000 allow_timeout_override: true } }\n"},
		{schedCache, copyTo(tiny), batching + "response_cache { enable: true }\n"},
	}
}

// schedOIPBody is the tiny model's request over OIP JSON, the same for
// every call: after the first, the cache model answers from the cache.
var schedOIPBody = []byte(`{"inputs":[{"name":"x","datatype":"FP32","shape":[1,4],"data":[1.5,2.5,3.5,4.5]}]}`)

// sched runs `bench -only sched`: what issue 34's scheduling costs, each
// figure a ratio to the plain model in the same process and run. Through
// the NATS door at 32 callers: a model with priority levels and a queue
// policy that no request uses (every request at the default level, the
// timeout never reached), and one with the response cache on, which the
// NATS door does not consult (the worker stores only once a door that
// looks up made the bucket). Through the HTTP
// door at one caller: a cache hit's latency against a model run's.
func (r *runner) sched(o *options) error {
	began := time.Now()
	fmt.Fprintf(r.w, "== scheduling: queue policy and response cache, %d cores, threadPerModel 1, %s per run\n", runtime.NumCPU(), o.d)
	if missing(o.tiny) {
		return fmt.Errorf("no tiny model at %q (-tiny; run from the repository root)", o.tiny)
	}
	bodies := map[string][]byte{schedPlain: tinyBody, schedQueue: tinyBody, schedCache: tinyBody}
	rc, err := r.startRepo(schedRepo(o.tiny), map[string]string{"threadPerModel": "1"}, bodies)
	if err != nil {
		return err
	}
	defer rc.close()
	if err := rc.await(schedPlain, schedQueue, schedCache); err != nil {
		return err
	}
	const rounds = 5
	per, _, err := rc.rounds(rounds, 32, o.d/4, rc.ops[schedPlain], rc.ops[schedQueue], rc.ops[schedCache])
	if err != nil {
		return err
	}
	t := table{r.w}
	t.header()
	names := []string{"plain (dynamic_batching), NATS, 32 callers", "priority levels + queue policy, unused", "response_cache on, NATS (no lookup there)"}
	for i, name := range names {
		t.row(name, merged(per[i]))
	}
	for i, what := range names[1:] {
		med, lo, hi := roundRatios(per, i+1, 0)
		fmt.Fprintf(r.w, "%s / plain, req/s at 32 callers: %.3f (median of %d rounds, %.3f-%.3f; target >= 0.97)\n", what, med, rounds, lo, hi)
	}
	http := func(model string) op { return httpOp(rc.httpURL+"/v2/models/"+model+"/infer", schedOIPBody, 1) }
	per, _, err = rc.rounds(3, 1, o.d/8, http(schedPlain), http(schedCache))
	if err != nil {
		return err
	}
	run, hit := merged(per[0]), merged(per[1])
	t.row("model run, HTTP (OIP JSON), 1 caller", run)
	t.row("response cache hit, HTTP (OIP JSON), 1 caller", hit)
	fmt.Fprintf(r.w, "cache hit p50 / model run p50, HTTP, 1 caller: %.3f\n", float64(hit.pct(0.5))/float64(run.pct(0.5)))
	fmt.Fprintf(r.w, "(scheduling: %s in all)\n\n", time.Since(began).Round(time.Second))
	return nil
}
