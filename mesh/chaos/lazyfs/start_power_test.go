package lazyfs_test

import (
	"context"
	"flag"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	goredis "github.com/redis/go-redis/v9"

	"github.com/cluster-serving/cluster-serving/bridge/redisdoor/redistest"
	"github.com/cluster-serving/cluster-serving/infer"
	"github.com/cluster-serving/cluster-serving/infer/infertest"
	"github.com/cluster-serving/cluster-serving/mesh"
	"github.com/cluster-serving/cluster-serving/mesh/chaos"
	"github.com/cluster-serving/cluster-serving/mesh/chaos/lazyfs"
)

const (
	// startPowerAcks is how many records each durable door (RESP, Redis)
	// has acknowledged when the power goes; the load runs on, so that the
	// kill finds records queued, running and answered at once.
	startPowerAcks = 300
	// startPowerWait bounds the wait for every acknowledged record's
	// answer after the restart; startPowerStall gives up sooner when no
	// answer came for that long (past mesh's default ackWait of 10s and
	// the restart: by then every redelivery has come).
	startPowerWait  = 60 * time.Second
	startPowerStall = 15 * time.Second
	// startPowerSettle is how long after the restart the clients keep
	// reading even when nothing is missing: past ackWait, so that a
	// record run again after the restart shows as a second answer.
	startPowerSettle = 12 * time.Second
)

// TestPowerLossStart runs `cluster-serving start` (the embedded NATS
// server with its store on a lazy mount, the NATS door, the RESP door and
// the Redis door in front of a redis-server with appendfsync always),
// loads its three doors, kills the process group with SIGKILL, cuts the
// power and starts it again on the same store and config. A record the
// RESP door answered with an entry id, or that redis-server took into
// the job's stream, is acknowledged: each must get its answer after the
// restart. With the default natsSync (always) none may be lost; with 2m
// the figures are only reported.
var lossy = flag.Bool("lazyfs.lossy", false, "TestPowerLossStart: also run natsSync 2m and report what it loses")

func TestPowerLossStart(t *testing.T) {
	if testing.Short() {
		t.Skip("builds cluster-serving and runs it with redis-server over a FUSE mount")
	}
	sp := setupStartPower(t)
	for _, tc := range []struct {
		name, sync string
		report     bool // the figures are logged, not asserted
	}{
		{"default natsSync always", "", false},
		{"natsSync 2m", "2m", true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if tc.report && !*lossy {
				t.Skip("the 2 min interval's losses are reported with -lazyfs.lossy (make chaos)")
			}
			begin := time.Now()
			out := newStartCase(t, sp, tc.sync).run(t)
			for _, f := range out.doors {
				t.Logf("natsSync %q: %s", tc.sync, f)
			}
			t.Logf("natsSync %q: %s; %s; ran in %v", tc.sync, out.nats, out.recovery(), time.Since(begin).Round(time.Millisecond))
			if tc.report {
				if out.exited != "" {
					t.Log(out.exited)
				}
				return
			}
			if out.exited != "" {
				t.Error(out.exited)
			}
			for _, f := range out.doors {
				// A RESP result read and DELeted just before the kill
				// may come back once: the door stores the delete
				// marker after the answer is written
				// (mesh.ResultBucket.DeleteLater), trading a second
				// answer for a lost one. Any other second answer is a
				// fault: the Redis door's client DELs in redis-server.
				twice := f.twice
				if f.door == "resp" {
					twice -= f.across
				}
				if f.lost != 0 || f.wrong != 0 || twice != 0 {
					t.Errorf("%s door: got %d lost, %d wrong, %d answered twice (not counting a DEL cut by the kill), of %d acknowledged; want 0",
						f.door, f.lost, f.wrong, twice, f.acked)
				}
			}
		})
	}
}

// startPower is what every case shares: the binary, the model, the ONNX
// Runtime library and the lazy mount the NATS stores live on.
type startPower struct {
	bin, lib, model string
	fsys            *lazyfs.FS
}

// setupStartPower finds ONNX Runtime and redis-server (failing or
// skipping as infertest.Missing does), mounts the lazy file system
// (skipping where FUSE cannot be mounted) and builds cluster-serving.
func setupStartPower(t *testing.T) *startPower {
	t.Helper()
	lib, err := infer.FindLibrary("", os.Getenv("ONNXRUNTIME_LIB"))
	if err != nil {
		infertest.Missing(t, err.Error())
	}
	if _, err := exec.LookPath("redis-server"); err != nil {
		infertest.Missing(t, "redis-server not found: apt-get install redis-server")
	}
	fsys := mount(t, lazyfs.Options{})
	bin := filepath.Join(t.TempDir(), "cluster-serving")
	cmd := exec.Command("go", "build", "-o", bin, "./cmd/cluster-serving")
	cmd.Dir = infertest.RepoRoot()
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("go build ./cmd/cluster-serving: %v\n%s", err, out)
	}
	return &startPower{bin: bin, lib: lib, model: infertest.Model("add_f32"), fsys: fsys}
}

// startCase is one case: its config, redis-server and clients.
type startCase struct {
	sp                *startPower
	cfg, job, logPath string
	env               []string
	natsURL           string
	resp, rdb         *goredis.Client
}

// newStartCase starts redis-server and writes the config: its NATS store
// on the lazy mount, a fresh job, the RESP and Redis doors, no HTTP.
func newStartCase(t *testing.T, sp *startPower, sync string) *startCase {
	t.Helper()
	dir := t.TempDir()
	ports := infertest.FreePorts(t, 2)
	redis, _ := redistest.StartPersistent(t)
	c := &startCase{sp: sp, job: "power" + strconv.Itoa(ports[0]), logPath: filepath.Join(dir, "start.log"),
		env: []string{"XDG_RUNTIME_DIR=" + dir}, natsURL: fmt.Sprintf("nats://127.0.0.1:%d", ports[0])}
	store, err := os.MkdirTemp(sp.fsys.Mountpoint(), "nats-")
	check(t, err)
	respAddr := fmt.Sprintf("127.0.0.1:%d", ports[1])
	text := fmt.Sprintf("modelPath: %s\njobName: %s\nonnxruntimeLib: %s\nnatsListen: 127.0.0.1:%d\nnatsStoreDir: %s\n"+
		"respListen: %s\nredisUrl: %s\nhttpPort: -1\nmetricsListen: off\nthreadPerModel: 1\nlogLevel: warn\n",
		sp.model, c.job, sp.lib, ports[0], store, respAddr, redis.Addr)
	if sync != "" {
		text += "natsSync: " + sync + "\n"
	}
	c.cfg = filepath.Join(dir, "config.yaml")
	check(t, os.WriteFile(c.cfg, []byte(text), 0o644))
	// No retries: a command resent after its connection broke could be
	// taken twice, and one refused must not count as acknowledged.
	c.resp = goredis.NewClient(&goredis.Options{Addr: respAddr, MaxRetries: -1, DialTimeout: time.Second})
	c.rdb = goredis.NewClient(&goredis.Options{Addr: redis.Addr, MaxRetries: -1, DialTimeout: time.Second})
	t.Cleanup(func() { _ = c.resp.Close(); _ = c.rdb.Close() })
	return c
}

// spawn starts `start` (see spawn), appending its output to the case's
// log.
func (c *startCase) spawn(t *testing.T) *natsProc {
	t.Helper()
	p := spawn(t, c.logPath, c.env, c.sp.bin, "start", "-c", c.cfg)
	p.url = c.natsURL
	return p
}

// waitReady waits until the three doors serve: a NATS request is
// answered right, the RESP door answers PING and the Redis door has made
// its consumer group; it returns a NATS connection that reconnects.
func (c *startCase) waitReady(t *testing.T, p *natsProc) *nats.Conn {
	t.Helper()
	ctx := context.Background()
	var nc *nats.Conn
	waitStart(t, p, c.logPath, 60*time.Second, "the doors", func() bool {
		if nc == nil {
			nc, _ = nats.Connect(c.natsURL, nats.MaxReconnects(-1), nats.ReconnectWait(100*time.Millisecond))
			if nc == nil {
				return false
			}
			t.Cleanup(nc.Close)
		}
		m, err := nc.Request(mesh.PredictSubject(c.job), chaos.GoodBody(0), 2*time.Second)
		if err != nil || checkPrediction(0, m) != nil || c.resp.Ping(ctx).Err() != nil {
			return false
		}
		groups, err := c.rdb.XInfoGroups(ctx, c.job).Result()
		return err == nil && len(groups) > 0
	})
	return nc
}

// waitStart polls cond every 20ms until it holds; it fails the test when
// the process exits first or cond still does not hold after d.
func waitStart(t *testing.T, p *natsProc, logPath string, d time.Duration, what string, cond func() bool) {
	t.Helper()
	for deadline := time.Now().Add(d); !cond(); time.Sleep(20 * time.Millisecond) {
		select {
		case <-p.done:
			t.Fatalf("start exited before %s: %v\n%s", what, p.cmd.ProcessState, tailOf(logPath))
		default:
		}
		if time.Now().After(deadline) {
			t.Fatalf("no %s after %v\n%s", what, d, tailOf(logPath))
		}
	}
}

// startOutcome is what one case saw.
type startOutcome struct {
	doors     []doorFigures
	nats      string        // what the NATS door's callers saw
	recovered time.Duration // from the restart to the last missing answer; -1 when some never came
	exited    string        // why the restarted start exited; "" while it ran
}

func (o startOutcome) recovery() string {
	if o.recovered < 0 {
		return "some acknowledged records were never answered after the restart"
	}
	return fmt.Sprintf("every acknowledged record answered %v after the restart", o.recovered.Round(time.Millisecond))
}

// run starts the case, loads its doors until each durable one has
// acknowledged startPowerAcks records, kills start (the whole group) and
// cuts the power at once, starts it again and waits for the answers.
func (c *startCase) run(t *testing.T) startOutcome {
	t.Helper()
	p := c.spawn(t)
	nc := c.waitReady(t, p)
	resp, redis := newDoorLoad("resp", c.job, c.resp), newDoorLoad("redis", c.job, c.rdb)
	nl := &natsLoad{nc: nc, subject: mesh.PredictSubject(c.job)}
	pollCtx, stopPolls := context.WithCancel(context.Background())
	loadCtx, stopLoads := context.WithCancel(context.Background())
	var polls, loads sync.WaitGroup
	defer polls.Wait()
	defer stopPolls()
	defer loads.Wait()
	defer stopLoads()
	for _, d := range []*doorLoad{resp, redis} {
		polls.Go(func() { d.poll(pollCtx) })
		for range 3 {
			loads.Go(func() { d.add(loadCtx) })
		}
	}
	for range 2 {
		loads.Go(func() { nl.run(loadCtx) })
	}
	waitStart(t, p, c.logPath, 60*time.Second, fmt.Sprint(startPowerAcks, " acknowledged records per door"), func() bool {
		return resp.ackedCount() >= startPowerAcks && redis.ackedCount() >= startPowerAcks
	})
	p.kill()
	resp.killed()
	redis.killed()
	dropped, err := c.sp.fsys.PowerCut()
	check(t, err)
	stopLoads()
	loads.Wait()
	redis.inStream, _ = c.rdb.XLen(context.Background(), c.job).Result()
	t.Logf("killed start and cut the power: %d unsynced bytes dropped", dropped)
	out := startOutcome{nats: nl.String()}
	p = c.spawn(t)
	out.recovered, out.exited = awaitAnswers(p, c.logPath, resp, redis)
	stopPolls()
	polls.Wait()
	out.doors = []doorFigures{resp.figures(), redis.figures()}
	return out
}

// awaitAnswers waits until every acknowledged record of doors has its
// answer and startPowerSettle has passed, or until startPowerWait, or
// startPowerStall without a new answer, or until start exits. It returns
// how long after the restart the last missing answer came (-1 when some
// never did) and, when start exited, why.
func awaitAnswers(p *natsProc, logPath string, doors ...*doorLoad) (time.Duration, string) {
	restart := time.Now()
	recovered := time.Duration(-1)
	last, progress := -1, restart
	for time.Since(restart) < startPowerWait {
		missing := 0
		for _, d := range doors {
			missing += d.outstanding()
		}
		if missing != last {
			last, progress = missing, time.Now()
		}
		if missing == 0 && recovered < 0 {
			recovered = time.Since(restart)
		}
		if (missing == 0 && time.Since(restart) >= startPowerSettle) || time.Since(progress) >= startPowerStall {
			break
		}
		select {
		case <-p.done:
			return recovered, fmt.Sprintf("start exited after the restart: %v\n%s", p.cmd.ProcessState, tailOf(logPath))
		case <-time.After(50 * time.Millisecond):
		}
	}
	return recovered, ""
}

// doorLoad is a client of one durable door (the RESP door, or the Redis
// door through redis-server). Its writers XADD records to the job's
// stream, at most startPowerWindow unanswered at a time, and note each
// one answered with an entry id; its poller reads the results as the
// Python OutputQueue does (KEYS, then HGET and DEL), so that a result
// read twice is a second answer the client sees. Safe for concurrent use.
type doorLoad struct {
	name, job string
	rdb       *goredis.Client
	next      atomic.Int64
	inStream  int64 // Redis: XLEN once the load stopped (entries the door had not taken)

	mu        sync.Mutex
	acked     map[string]int64 // uri → id of every XADD answered with an entry id
	answers   map[string]int   // uri → right results read
	wrong     int              // results that are not their record's answer
	errs      int              // XADDs refused or cut
	killAt    time.Time        // when start was killed; zero before
	ackedKill int              // acknowledged by the kill
	atKill    int              // acknowledged and unanswered at the kill
	readKill  map[string]bool  // uris whose first answer was read before the kill
	across    int              // answered before the kill and again after the restart
}

// startPowerWindow bounds a door's acknowledged, unanswered records, as
// a client with a window does: enough in flight at the kill, and a
// backlog the restart clears in a few seconds.
const startPowerWindow = 100

func newDoorLoad(name, job string, rdb *goredis.Client) *doorLoad {
	return &doorLoad{name: name, job: job, rdb: rdb, acked: map[string]int64{}, answers: map[string]int{}, readKill: map[string]bool{}}
}

// add XADDs records one after the other until ctx ends, pausing while
// the window is full and after a failure (the door is down).
func (d *doorLoad) add(ctx context.Context) {
	for ctx.Err() == nil {
		if d.outstanding() >= startPowerWindow {
			sleepCtx(ctx, 5*time.Millisecond)
			continue
		}
		id := d.next.Add(1)
		uri := d.name + "-" + strconv.FormatInt(id, 10)
		// Not ctx: a command cut short by the end of the load may still
		// have been taken, and would count as refused.
		actx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		err := d.rdb.XAdd(actx, &goredis.XAddArgs{Stream: d.job,
			Values: []any{"uri", uri, "data", string(chaos.GoodBody(id)), "serde", "stream"}}).Err()
		cancel()
		d.mu.Lock()
		if err == nil {
			d.acked[uri] = id
		} else {
			d.errs++
		}
		d.mu.Unlock()
		if err != nil {
			sleepCtx(ctx, 50*time.Millisecond)
		}
	}
}

// poll reads the door's results every 20ms until ctx ends.
func (d *doorLoad) poll(ctx context.Context) {
	prefix := "cluster-serving_" + d.job + ":"
	for ctx.Err() == nil {
		d.read(ctx, prefix)
		sleepCtx(ctx, 20*time.Millisecond)
	}
}

// read reads and deletes every result key of the job, in one pipeline.
func (d *doorLoad) read(ctx context.Context, prefix string) {
	keys, err := d.rdb.Keys(ctx, prefix+"*").Result()
	if err != nil || len(keys) == 0 {
		return
	}
	vals := make([]*goredis.StringCmd, len(keys))
	_, _ = d.rdb.Pipelined(ctx, func(p goredis.Pipeliner) error {
		for i, k := range keys {
			vals[i] = p.HGet(ctx, k, "value")
			p.Del(ctx, k)
		}
		return nil
	})
	d.mu.Lock()
	defer d.mu.Unlock()
	for i, k := range keys {
		v, err := vals[i].Result()
		if err != nil {
			continue
		}
		uri := strings.TrimPrefix(k, prefix)
		id, err := strconv.ParseInt(uri[strings.LastIndexByte(uri, '-')+1:], 10, 64)
		if err != nil || v != chaos.WantRedis(id) {
			d.wrong++
			continue
		}
		d.answered(uri)
	}
}

// answered counts a right answer to uri; d.mu is held.
func (d *doorLoad) answered(uri string) {
	d.answers[uri]++
	switch {
	case d.answers[uri] == 1 && d.killAt.IsZero():
		d.readKill[uri] = true
	case d.answers[uri] == 2 && d.readKill[uri] && !d.killAt.IsZero():
		d.across++
	}
}

func (d *doorLoad) ackedCount() int {
	d.mu.Lock()
	defer d.mu.Unlock()
	return len(d.acked)
}

// outstanding counts the acknowledged records not answered yet.
func (d *doorLoad) outstanding() int {
	d.mu.Lock()
	defer d.mu.Unlock()
	return d.outstandingLocked()
}

func (d *doorLoad) outstandingLocked() int {
	n := 0
	for uri := range d.acked {
		if d.answers[uri] == 0 {
			n++
		}
	}
	return n
}

// killed notes what was acknowledged and unanswered when start died.
func (d *doorLoad) killed() {
	d.mu.Lock()
	defer d.mu.Unlock()
	d.killAt, d.ackedKill, d.atKill = time.Now(), len(d.acked), d.outstandingLocked()
}

func sleepCtx(ctx context.Context, d time.Duration) {
	select {
	case <-ctx.Done():
	case <-time.After(d):
	}
}

// doorFigures is what became of one durable door's records.
type doorFigures struct {
	door             string
	acked, ackedKill int // acknowledged in all; by the kill
	atKill           int // acknowledged and unanswered at the kill
	taken            int // Redis: entries the door had removed from the stream; -1 for RESP
	lost, wrong      int // acknowledged and never answered; wrong answers
	twice, across    int // answered more than once; of them, read before the kill and again after
	unacked, errs    int // answered without an entry id; XADDs refused or cut
}

func (d *doorLoad) figures() doorFigures {
	d.mu.Lock()
	defer d.mu.Unlock()
	f := doorFigures{door: d.name, acked: len(d.acked), ackedKill: d.ackedKill, atKill: d.atKill, taken: -1,
		lost: d.outstandingLocked(), wrong: d.wrong, across: d.across, errs: d.errs}
	if d.name == "redis" {
		f.taken = len(d.acked) - int(d.inStream)
	}
	for uri, n := range d.answers {
		if n > 1 {
			f.twice++
		}
		if _, ok := d.acked[uri]; !ok {
			f.unacked++
		}
	}
	return f
}

func (f doorFigures) String() string {
	taken := ""
	if f.taken >= 0 {
		taken = fmt.Sprintf(", %d taken from the stream by the door", f.taken)
	}
	return fmt.Sprintf("%s door: %d acknowledged (%d by the kill, %d of them unanswered then%s), %d lost, %d wrong, "+
		"%d answered twice (%d read and DELeted before the kill, read again after it), %d answered without an entry id, %d XADDs refused or cut",
		f.door, f.acked, f.ackedKill, f.atKill, taken, f.lost, f.wrong, f.twice, f.across, f.unacked, f.errs)
}

// natsLoad is a caller of the NATS door: request after request until its
// ctx ends. A request answered is trivially not lost; it counts them.
type natsLoad struct {
	nc                       *nats.Conn
	subject                  string
	next, answered, failures atomic.Int64
}

func (n *natsLoad) run(ctx context.Context) {
	for ctx.Err() == nil {
		id := n.next.Add(1)
		rctx, cancel := context.WithTimeout(ctx, 5*time.Second)
		m, err := n.nc.RequestWithContext(rctx, n.subject, chaos.GoodBody(id))
		cancel()
		if err == nil && checkPrediction(id, m) == nil {
			n.answered.Add(1)
			continue
		}
		n.failures.Add(1)
		sleepCtx(ctx, 50*time.Millisecond)
	}
}

func (n *natsLoad) String() string {
	return fmt.Sprintf("nats door: %d requests answered right, %d failed or cut by the kill", n.answered.Load(), n.failures.Load())
}

// checkPrediction checks a NATS door answer to record id, the body
// chaos.GoodBody(id).
func checkPrediction(id int64, m *nats.Msg) error {
	if code := m.Header.Get("Nats-Service-Error-Code"); code != "" {
		return fmt.Errorf("record %d: error %s %s", id, code, m.Header.Get("Nats-Service-Error"))
	}
	return chaos.CheckPredictions(id, m.Data)
}
