package mesh

import (
	"context"
	"encoding/json"
	"log/slog"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
)

// A process connected to a server cut off from the rest of its cluster (a
// partition with that server on the minority side) keeps a healthy TCP
// connection: pings pass, so nats.go never moves. But nothing there
// reaches JetStream: every store and pull fails until the partition heals
// (the fault suite's partition row: 28 s without an answer, thousands of
// requests late). The account's JetStream info does not show it: a cut-off
// server that led the meta group answers it for 20 s more, until it steps
// down. A stream's info does: a leader cut off sees its replicas inactive
// within seconds, and a cut-off follower cannot reach the leader at all.
//
// So KeepReachable asks the server it is connected to for the info of a
// replicated stream of the job every reachProbeEvery; when reachFailures
// probes in a row get no answer, "not available" (503), or a leader that
// has not heard from a quorum of its replicas within reachStale, and the
// connection knows of other servers, it reconnects (nats.go moves to
// another server of its pool), then leaves the connection alone for
// reachSettle: an election (a server killed) also fails the probes for a
// few seconds wherever a process is connected, and one move is enough.
const (
	reachProbeEvery = time.Second
	reachTimeout    = time.Second
	reachFailures   = 2
	reachStale      = 2 * time.Second
	reachSettle     = 10 * time.Second
)

// KeepReachable runs until ctx ends, moving nc to another server of its
// pool when the one it is connected to cannot reach JetStream (see
// above): the leader of stream, or with stream "" the meta leader (the
// account's JetStream info). It does nothing while nc knows a single
// server.
func KeepReachable(ctx context.Context, nc *nats.Conn, stream string, log *slog.Logger) {
	subject := "$JS.API.INFO"
	if stream != "" {
		subject = "$JS.API.STREAM.INFO." + stream
	}
	failures := 0
	every(ctx, reachProbeEvery, func(time.Time) {
		if ctx.Err() != nil {
			return // it ended during the last settle
		}
		if !nc.IsConnected() || len(nc.Servers()) < 2 {
			failures = 0
			return
		}
		if reachable(ctx, nc, subject) {
			failures = 0
			return
		}
		if failures++; failures < reachFailures {
			return
		}
		log.Warn("mesh: the NATS server cannot reach JetStream: connecting to another", "server", nc.ConnectedServerName(),
			"probes_failed", failures)
		_ = nc.ForceReconnect()
		failures = 0
		select {
		case <-ctx.Done():
		case <-time.After(reachSettle):
		}
	})
}

// reachable says whether the server nc is connected to answered a
// JetStream API request at subject with anything but "not available"
// (503) or a stream leader out of touch with a quorum of its replicas.
func reachable(ctx context.Context, nc *nats.Conn, subject string) bool {
	pctx, cancel := context.WithTimeout(ctx, reachTimeout)
	defer cancel()
	msg, err := nc.RequestWithContext(pctx, subject, nil)
	if err != nil {
		return ctx.Err() != nil // a probe cut short by the end counts as answered
	}
	var resp struct {
		Error *struct {
			Code int `json:"code"`
		} `json:"error"`
		Config struct {
			Replicas int `json:"num_replicas"`
		} `json:"config"`
		Cluster *jetstream.ClusterInfo `json:"cluster"`
	}
	if json.Unmarshal(msg.Data, &resp) != nil {
		return true
	}
	if resp.Error != nil {
		return resp.Error.Code != 503
	}
	if resp.Cluster == nil || resp.Config.Replicas < 2 {
		return true
	}
	live := 1 // the leader, which answered
	for _, p := range resp.Cluster.Replicas {
		if p.Current && !p.Offline && p.Active < reachStale {
			live++
		}
	}
	return 2*live > resp.Config.Replicas
}
