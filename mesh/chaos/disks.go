package chaos

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/cluster-serving/cluster-serving/mesh/chaos/lazyfs"
)

// mountDisks puts each server's store on a lazyfs mount of its own, its
// backing directory beside (Options.LazyFS). Its error wraps
// lazyfs.ErrNoFUSE where FUSE is not available.
func (c *Cluster) mountDisks() error {
	if !c.opt.LazyFS {
		return nil
	}
	for _, n := range c.NATS {
		backing := filepath.Join(c.opt.Dir, "disks", n.name)
		mnt := filepath.Join(c.opt.Dir, "js", n.name)
		for _, d := range []string{backing, mnt} {
			if err := os.MkdirAll(d, 0o755); err != nil {
				return err
			}
		}
		fs, err := lazyfs.Mount(backing, mnt, lazyfs.Options{})
		if err != nil {
			return fmt.Errorf("store of %s: %w", n.name, err)
		}
		n.disk = fs
	}
	return nil
}

// unmountDisks unmounts the stores, once their servers are dead.
func (c *Cluster) unmountDisks() {
	for _, n := range c.NATS {
		if n.disk != nil {
			_ = n.disk.Unmount()
		}
	}
}

// errNoDisks is a disk fault's error on a cluster without lazyfs.
var errNoDisks = errors.New("chaos: the servers' stores are not on lazyfs (Options.LazyFS)")

// powerCut kills the servers with kill -9 and drops what their stores had
// not fsynced, as a power loss of their machines; it returns the bytes
// dropped per server. It restarts nothing.
func powerCut(nodes []*natsNode) (string, error) {
	var notes []string
	for _, n := range nodes {
		n.Kill()
	}
	for _, n := range nodes {
		if n.disk == nil {
			return "", errNoDisks
		}
		dropped, err := n.disk.PowerCut()
		if err != nil {
			return "", fmt.Errorf("%s: %w", n.name, err)
		}
		notes = append(notes, fmt.Sprintf("%s %d B unsynced", n.name, dropped))
	}
	return strings.Join(notes, ", "), nil
}

// restart starts the servers again and waits until each is healthy.
func (c *Cluster) restart(ctx context.Context, nodes []*natsNode) error {
	for _, n := range nodes {
		if err := n.Start(); err != nil {
			return err
		}
	}
	for _, n := range nodes {
		if err := c.waitNATSNode(ctx, n); err != nil {
			return err
		}
	}
	return nil
}

// ClusterPowerCut is a coordinated power failure: all three servers die
// at once and lose what they had not fsynced, then start again after a
// second. Every door depends on NATS: no gap target.
func ClusterPowerCut() Scenario {
	return Scenario{Name: "nats cluster power cut", Exempt: allDoors(),
		Fault: func(ctx context.Context, c *Cluster, _ *Load) (string, error) {
			note, err := powerCut(c.NATS)
			if err != nil {
				return note, err
			}
			time.Sleep(time.Second)
			if err := c.restart(ctx, c.NATS); err == nil || ctx.Err() != nil {
				return note, err
			}
			// nats-server 2.15.2 can leave a stream without a leader after
			// such a cut, its replicas each waiting to catch up from a
			// leader ("catchup aborted, no leader"): restart the servers
			// once more, as an operator would, and say so.
			for _, n := range c.NATS {
				n.Stop(10 * time.Second)
			}
			note += "; servers restarted once more (a stream stayed without a leader)"
			if err := c.restart(ctx, c.NATS); err != nil {
				return note + "; still not healthy: " + err.Error(), nil
			}
			return note, nil
		}}
}

// OSCrashInPartition crashes one server's OS (kill -9 and its unsynced
// writes dropped) while another is cut off: a follower of the work queue
// is isolated, then the other follower crashes and restarts, and the
// partition heals after hold. Jepsen lost acknowledged writes to NATS
// 2.12.1 this way with the default sync interval. Quorum is lost while
// the crashed server is down: no gap target.
func OSCrashInPartition(hold time.Duration) Scenario {
	return Scenario{Name: "OS crash during a partition", Exempt: allDoors(),
		Fault: func(ctx context.Context, c *Cluster, _ *Load) (string, error) {
			if len(c.routes) == 0 {
				return "", errNoRoutes
			}
			leader, _ := c.WorkLeader(ctx)
			var followers []int
			for i, n := range c.NATS {
				if n.name != leader {
					followers = append(followers, i)
				}
			}
			cut, crash := followers[0], followers[1]
			heal := c.Isolate(cut)
			time.Sleep(time.Second)
			note, err := powerCut([]*natsNode{c.NATS[crash]})
			if err != nil {
				heal()
				return note, err
			}
			time.Sleep(time.Second)
			err = c.restart(ctx, []*natsNode{c.NATS[crash]})
			time.Sleep(hold)
			heal()
			note = fmt.Sprintf("%s cut off, %s crashed (%s)", c.NATS[cut].name, c.NATS[crash].name, note)
			return note, errors.Join(err, c.waitRoutes(ctx))
		}}
}

// DiskFull fills the disk under the work queue leader's store: its
// capacity is set to what it uses plus 1 MiB for hold, then lifted. The
// stream moves its leadership away from a store that failed a write; the
// doors go on within 5 s, and the server takes writes again once the
// space is back, without a restart.
func DiskFull(hold time.Duration) Scenario {
	return Scenario{Name: fmt.Sprintf("leader's disk full %v", hold), GapTarget: 5 * time.Second,
		Fault: func(ctx context.Context, c *Cluster, _ *Load) (string, error) {
			leader, _ := c.WorkLeader(ctx)
			n := c.NATS[max(c.nodeIndex(leader), 0)]
			if n.disk == nil {
				return "", errNoDisks
			}
			if err := n.disk.SetCapacity(n.disk.Used() + 1<<20); err != nil {
				return n.name, err
			}
			time.Sleep(hold)
			if err := n.disk.SetCapacity(0); err != nil {
				return n.name, err
			}
			return c.recoverStore(ctx, n)
		}}
}

// recoverStore waits for a server whose disk was full to be healthy
// again, and restarts it (SIGTERM, as its operator would) when it is not
// within 15 s: a clustered nats-server (2.15.2) keeps the write error a
// stream's store latched, and reports that stream unhealthy, until it
// restarts. The embedded server restarts JetStream by itself (embedded's
// recover.go); an external one needs its operator.
func (c *Cluster) recoverStore(ctx context.Context, n *natsNode) (string, error) {
	wctx, cancel := context.WithTimeout(ctx, 15*time.Second)
	err := c.waitNATSNode(wctx, n)
	cancel()
	if err == nil {
		return n.name, nil
	}
	n.Stop(10 * time.Second)
	if err := n.Start(); err != nil {
		return n.name, err
	}
	return n.name + " (restarted: its store kept the write error)", c.waitNATSNode(ctx, n)
}

func allDoors() []Door { return []Door{DoorNATS, DoorHTTP, DoorRedis, DoorRESP} }
