package respdoor

import (
	"context"
	"fmt"
	"log/slog"
	"net"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/tidwall/match"
	"github.com/tidwall/redcon"
)

// memoryTTL is how long INFO's used_memory is reused: the original
// client calls INFO before every XADD, and reading the queues is a
// JetStream request per partition.
const memoryTTL = time.Second

// memory caches the jobs' work queue bytes and their limit.
type memory struct {
	mu          sync.Mutex
	at          time.Time
	used, limit int64
}

// queueBytes is what the door's jobs' work queues hold and their summed
// limit (0: one of them has none), at most memoryTTL old. A queue that
// cannot be read counts as empty: INFO must answer, and XADD says the
// truth about a full queue itself.
func (d *Door) queueBytes() (used, limit int64) {
	d.mem.mu.Lock()
	defer d.mem.mu.Unlock()
	if time.Since(d.mem.at) < memoryTTL {
		return d.mem.used, d.mem.limit
	}
	ctx, cancel := context.WithTimeout(cmdContext(), d.cfg.Timeout)
	defer cancel()
	var sum, lim int64
	unlimited := false
	for _, job := range d.cfg.Jobs {
		u, l, err := d.m.QueueBytes(ctx, job)
		if err != nil {
			d.lim.Log(ctx, slog.LevelDebug, "INFO: reading the work queue", err, "job", job)
			continue
		}
		sum, lim = sum+u, lim+l
		unlimited = unlimited || l == 0
	}
	if unlimited {
		lim = 0
	}
	d.mem.at, d.mem.used, d.mem.limit = time.Now(), sum, lim
	return sum, lim
}

// info is INFO [section …]: the sections clients read, with honest
// values. used_memory and maxmemory are the bytes waiting in the jobs'
// JetStream work queues and their limit (queueMaxBytes), so that the
// original client's rule (no XADD while used_memory >= 0.6 * maxmemory)
// holds back writes before the queue refuses them.
func (d *Door) info(c redcon.Conn, _ *session, args [][]byte) {
	want := map[string]bool{}
	for _, a := range args[1:] {
		want[strings.ToLower(string(a))] = true
	}
	all := len(want) == 0 || want["all"] || want["everything"] || want["default"]
	var b strings.Builder
	section := func(name string, lines ...string) {
		if !all && !want[strings.ToLower(name)] {
			return
		}
		if b.Len() > 0 {
			b.WriteString("\r\n")
		}
		b.WriteString("# " + name + "\r\n")
		for _, l := range lines {
			b.WriteString(l + "\r\n")
		}
	}
	port := ""
	if ta, ok := d.lst.Addr().(*net.TCPAddr); ok {
		port = strconv.Itoa(ta.Port)
	}
	section("Server", "# the cluster-serving RESP door "+d.cfg.Version+": a subset of Redis's commands onto NATS JetStream (docs/resp.md)",
		"redis_version:"+redisVersion, "redis_mode:standalone", "cluster_serving_version:"+d.cfg.Version, "tcp_port:"+port,
		fmt.Sprintf("uptime_in_seconds:%d", int64(time.Since(d.started).Seconds())))
	section("Clients", fmt.Sprintf("connected_clients:%d", d.lst.Open()), fmt.Sprintf("maxclients:%d", d.cfg.MaxConnections))
	if all || want["memory"] {
		used, limit := d.queueBytes()
		section("Memory", "# used_memory: bytes waiting in the JetStream work queues of this door's jobs; maxmemory: their limit (queueMaxBytes; 0: none)",
			"# results are kept in JetStream key-value buckets, not in this process's memory",
			fmt.Sprintf("used_memory:%d", used), fmt.Sprintf("maxmemory:%d", limit), "maxmemory_policy:noeviction")
	}
	section("Persistence", "loading:0")
	section("Replication", "role:master", "connected_slaves:0")
	c.WriteBulkString(b.String())
}

// config is CONFIG GET pattern …: the parameters clients read, matched
// as Redis matches them (globs); and CONFIG SET notify-keyspace-events
// (notify.go). Other parameters and subcommands are refused.
func (d *Door) config(c redcon.Conn, _ *session, args [][]byte) {
	if strings.EqualFold(string(args[1]), "SET") {
		d.configSet(c, args[2:])
		return
	}
	if !strings.EqualFold(string(args[1]), "GET") || len(args) < 3 {
		c.WriteError("ERR unknown subcommand '" + printable(args[1]) + "' (cluster-serving RESP door: CONFIG GET, and CONFIG SET " + notifyParam + " only; set things in config.yaml)")
		return
	}
	var out []string
	for _, p := range [][2]string{
		{"databases", "1"}, {"maxclients", strconv.Itoa(d.cfg.MaxConnections)},
		{"timeout", strconv.Itoa(int(d.cfg.IdleTimeout.Seconds()))}, {"maxmemory-policy", "noeviction"},
		{"appendonly", "no"}, {"save", ""}, {"proto-max-bulk-len", strconv.Itoa(d.cfg.MaxCommandBytes)},
		{notifyParam, formatNotify(d.ps.flags.Load())},
	} {
		if matchAny(p[0], args[2:]) {
			out = append(out, p[0], p[1])
		}
	}
	if matchAny("maxmemory", args[2:]) {
		_, limit := d.queueBytes()
		out = append(out, "maxmemory", strconv.FormatInt(limit, 10))
	}
	c.WriteArray(len(out))
	for _, s := range out {
		c.WriteBulkString(s)
	}
}

// matchAny reports whether name matches one of patterns, case-insensitively.
func matchAny(name string, patterns [][]byte) bool {
	for _, p := range patterns {
		if ok, _ := match.MatchLimit(name, strings.ToLower(string(p)), maxGlobSteps); ok {
			return true
		}
	}
	return false
}
