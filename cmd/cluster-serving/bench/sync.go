package bench

import (
	"fmt"
	"slices"
	"time"

	"github.com/cluster-serving/cluster-serving/infer/infertest/freeport"
)

// syncSettings are the natsSync policies syncCost compares: the durable
// default first, the ratios' base last.
var syncSettings = []string{"always", "2m"}

// syncCost measures what the durable default costs: one serving process
// per natsSync setting, each with its RESP door, loaded in turn (their
// order turned every round, as tinyTracing's) through the NATS door at
// concurrency 32 and then with 50 RESP clients (XADD, poll, DEL); the
// median round of each counts, and each round's own ratio.
func (r *runner) syncCost(model string, d time.Duration) error {
	n := len(syncSettings)
	nats, resp := make([]op, n), make([]op, n)
	children := make([]*child, n)
	for i, s := range syncSettings {
		ports, err := freeport.Take(1)
		if err != nil {
			return err
		}
		addr := fmt.Sprintf("127.0.0.1:%d", ports[0])
		c, do, closeChild, err := r.startNATSChild(model, map[string]string{"threadPerModel": "1", "natsSync": s, "respListen": addr})
		if err != nil {
			return err
		}
		defer closeChild()
		rdo, closeResp := redisOp(addr, c.job, tinyBody, "stream", 2*time.Millisecond, 50)
		defer closeResp()
		runLoad(8, time.Second, 500, do) // warm-up
		runLoad(8, time.Second, 200, rdo)
		nats[i], resp[i], children[i] = do, rdo, c
	}
	const rounds = 5
	fmt.Fprintf(r.w, "== durability cost (natsSync), tiny model, %d rounds of %s per setting, the order turned each round; median round\n", rounds, d/4)
	t := table{r.w}
	t.header()
	medNATS, roundsNATS, cpuNATS := medianRounds(rounds, d/4, nats, children)
	medRESP, roundsRESP, cpuRESP := medianRounds(rounds, d/4, resp, children)
	for i, s := range syncSettings {
		t.row("NATS door, 32 callers, natsSync "+s, medNATS[i])
		fmt.Fprintf(r.w, "  %s\n", cpuNATS[i])
	}
	for i, s := range syncSettings {
		t.row("RESP door, 50 clients (XADD, poll, DEL), "+s, medRESP[i])
		fmt.Fprintf(r.w, "  %s\n", cpuRESP[i])
	}
	m, lo, hi := roundRatios(roundsNATS, 0, n-1)
	fmt.Fprintf(r.w, "NATS door req/s, always / 2m: %.3f (median of the rounds' ratios, %.3f-%.3f; target >= 0.85)\n", m, lo, hi)
	m, lo, hi = roundRatios(roundsRESP, 0, n-1)
	fmt.Fprintf(r.w, "RESP door records/s, always / 2m: %.3f (%.3f-%.3f)\n\n", m, lo, hi)
	return nil
}

// roundRatios is the median, lowest and highest over the rounds of
// perRound[i]'s rate ÷ perRound[base]'s in the same round.
func roundRatios(perRound [][]loadResult, i, base int) (med, lo, hi float64) {
	rs := make([]float64, len(perRound[i]))
	for k := range rs {
		rs[k] = perRound[i][k].rate() / perRound[base][k].rate()
	}
	slices.Sort(rs)
	return rs[len(rs)/2], rs[0], rs[len(rs)-1]
}
