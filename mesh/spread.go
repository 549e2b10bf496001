package mesh

import (
	"context"
	"encoding/json"
	"math/rand/v2"
	"strings"
	"time"

	"github.com/nats-io/nats.go/jetstream"
)

// rebalanceEvery is how often a worker spreads its job's leaders again,
// plus up to rebalanceJitter so that a job's workers do not all ask at once.
const (
	rebalanceEvery  = 10 * time.Second
	rebalanceJitter = 5 * time.Second
)

// rebalance runs spreadLeaders every rebalanceEvery until ctx ends. A
// server that died hands its leaders to the others, and gets none back
// when it returns: without this, after a few node losses one server leads
// every partition, and its death stalls the whole job for an election
// (seen in the fault suite: 5 s gaps on the third kill). Spread leaders
// are left alone, so a balanced job costs a few API reads per pass.
func rebalance(ctx context.Context, js jetstream.JetStream, cfg StreamConfig) {
	for {
		select {
		case <-time.After(rebalanceEvery + rand.N(rebalanceJitter)):
			spreadLeaders(ctx, js, cfg)
		case <-ctx.Done():
			return
		}
	}
}

// spreadTimeout bounds spreadLeaders: it is best effort and must not hold
// a start for long.
const spreadTimeout = 5 * time.Second

// spreadLeaders moves the leaders of a job's work partitions onto
// different servers where they coincide, and puts each partition's
// workers consumer and results partition on its work stream's leader:
// then one server's death stops one partition (publish, consume and
// results alike) while the others serve on. Partitions are placed by
// JetStream at random, so two of three often share a leader. It asks for
// step-downs with a preferred server ($JS.API.STREAM.LEADER.STEPDOWN with
// placement.preferred, nats-server 2.11+) and never fails: an older
// server, a leader not elected yet or a refused step-down leave the
// placement as it is.
func spreadLeaders(ctx context.Context, js jetstream.JetStream, cfg StreamConfig) {
	ctx, cancel := context.WithTimeout(ctx, spreadTimeout)
	defer cancel()
	used := map[string]int{}
	for p := range cfg.Partitions {
		name := PartitionStreamName(cfg.Job, p)
		leader, peers := streamLeader(ctx, js, name)
		if leader == "" {
			continue
		}
		target := leader
		if alt := leastUsed(peers, used); alt != "" && used[alt] < used[leader] {
			if stepDown(ctx, js, "STREAM.LEADER.STEPDOWN."+name, alt) {
				target = alt
			}
		}
		used[target]++
		if c, err := js.Consumer(ctx, name, WorkersConsumer); err == nil {
			if ci := c.CachedInfo(); ci.Cluster != nil && ci.Cluster.Leader != "" && ci.Cluster.Leader != target {
				stepDown(ctx, js, "CONSUMER.LEADER.STEPDOWN."+name+"."+WorkersConsumer, target)
			}
		}
		results := ResultsPartitionStreamName(cfg.Job, p)
		if rl, _ := streamLeader(ctx, js, results); rl != "" && rl != target {
			stepDown(ctx, js, "STREAM.LEADER.STEPDOWN."+results, target)
		}
		followLeader(ctx, js, results, target)
	}
}

// followLeader moves the leaders of stream's consumers (the doors' results
// consumers, such as redis-bridge) onto target, so that they die with
// their partition rather than stall a second one.
func followLeader(ctx context.Context, js jetstream.JetStream, stream, target string) {
	st, err := js.Stream(ctx, stream)
	if err != nil {
		return
	}
	names := st.ConsumerNames(ctx)
	for name := range names.Name() {
		c, err := st.Consumer(ctx, name)
		if err != nil {
			continue
		}
		if ci := c.CachedInfo(); ci.Cluster != nil && ci.Cluster.Leader != "" && ci.Cluster.Leader != target {
			stepDown(ctx, js, "CONSUMER.LEADER.STEPDOWN."+stream+"."+name, target)
		}
	}
}

// streamLeader returns the name of the stream's leader and of its current,
// online peers, waiting a little for a stream just created to elect one.
// It returns "" when none is known within ctx.
func streamLeader(ctx context.Context, js jetstream.JetStream, name string) (string, []string) {
	for {
		st, err := js.Stream(ctx, name)
		if err == nil {
			if ci := st.CachedInfo().Cluster; ci != nil && ci.Leader != "" {
				peers := []string{ci.Leader}
				for _, r := range ci.Replicas {
					if r != nil && r.Current && !r.Offline {
						peers = append(peers, r.Name)
					}
				}
				return ci.Leader, peers
			}
		}
		select {
		case <-time.After(100 * time.Millisecond):
		case <-ctx.Done():
			return "", nil
		}
	}
}

// leastUsed returns the peer that leads the fewest partitions so far,
// the first listed on a tie; "" for no peers.
func leastUsed(peers []string, used map[string]int) string {
	best := ""
	for _, p := range peers {
		if best == "" || used[p] < used[best] {
			best = p
		}
	}
	return best
}

// stepDown asks the leader of the JetStream API object api (after the API
// prefix) to hand leadership to server preferred, and reports whether it
// agreed.
func stepDown(ctx context.Context, js jetstream.JetStream, api, preferred string) bool {
	body, _ := json.Marshal(map[string]any{"placement": map[string]string{"preferred": preferred}})
	prefix := js.Options().APIPrefix
	if prefix == "" {
		prefix = jetstream.DefaultAPIPrefix
	}
	if !strings.HasSuffix(prefix, ".") {
		prefix += "."
	}
	m, err := js.Conn().RequestWithContext(ctx, prefix+api, body)
	if err != nil {
		return false
	}
	var resp struct {
		Success bool `json:"success"`
	}
	return json.Unmarshal(m.Data, &resp) == nil && resp.Success
}
