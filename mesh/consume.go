package mesh

import (
	"context"
	"errors"
	"sync"
	"time"

	"github.com/nats-io/nats.go/jetstream"
)

// Pull settings of a worker's consumers. A pull request lives pullExpiry;
// the server sends an idle heartbeat every pullHeartbeat, and two missed
// ones make nats.go send the pull again. A consumer leader killed with
// its server answers nothing, so this is how soon a worker pulls from the
// new leader once one is elected: about 2 s, not the 30 s of the
// defaults.
const (
	pullExpiry    = 4 * time.Second
	pullHeartbeat = time.Second
	// resumeEvery is the pause between tries to (re)start consuming a
	// partition whose consumer cannot be reached.
	resumeEvery = time.Second
)

// consumers runs one supervised Consume per partition, all feeding one
// handler: the work partitions of a worker, the results partitions of a
// door. A partition whose consumer cannot be reached (its leader is being
// elected, its server is gone) does not stop the others: its supervisor
// tries again every resumeEvery, and nats.go's own Consume recovers from
// missed heartbeats. Errors are logged once per cause. Closing stopping
// makes each supervisor drain its Consume within grace.
type consumers struct {
	// stream names partition p's stream (the key errors are logged under).
	stream func(p int) string
	// lookup gets (or creates) partition p's consumer.
	lookup func(ctx context.Context, p int) (jetstream.Consumer, error)
	handle jetstream.MessageHandler
	// batch is each partition's pull batch.
	batch    int
	causes   *causeLog
	stopping <-chan struct{}
	grace    time.Duration
	wg       sync.WaitGroup
}

// start launches a supervisor per partition of n.
func (cs *consumers) start(ctx context.Context, n int) {
	for p := range n {
		cs.wg.Add(1)
		go func() {
			defer cs.wg.Done()
			cs.supervise(ctx, p)
		}()
	}
}

// wait returns once every supervisor has drained and returned.
func (cs *consumers) wait() { cs.wg.Wait() }

// supervise consumes partition p until stopping closes, restarting
// Consume whenever it ends on its own (consumer deleted and made again,
// connection closed and reopened).
func (cs *consumers) supervise(ctx context.Context, p int) {
	stream := cs.stream(p)
	for {
		cc, err := cs.consume(ctx, p, stream)
		if err == nil {
			select {
			case <-cs.stopping:
				cs.drain(cc)
				return
			case <-cc.Closed():
				err = errors.New("consume ended")
			}
		}
		select {
		case <-cs.stopping:
			return
		default:
		}
		cs.causes.report(stream, "mesh: consume partition; retrying", err)
		select {
		case <-time.After(resumeEvery):
		case <-cs.stopping:
			return
		}
	}
}

// consume gets partition p's consumer and starts pulling from it.
func (cs *consumers) consume(ctx context.Context, p int, stream string) (jetstream.ConsumeContext, error) {
	lctx, cancel := context.WithTimeout(ctx, pullExpiry)
	defer cancel()
	cons, err := cs.lookup(lctx, p)
	if err != nil {
		return nil, err
	}
	return cons.Consume(func(msg jetstream.Msg) {
		cs.causes.ok(stream, "mesh: partition consumed again")
		cs.handle(msg)
	},
		jetstream.PullMaxMessages(cs.batch),
		jetstream.PullExpiry(pullExpiry),
		jetstream.PullHeartbeat(pullHeartbeat),
		jetstream.ConsumeErrHandler(func(_ jetstream.ConsumeContext, err error) {
			select {
			case <-cs.stopping:
			default:
				cs.causes.report(stream, "mesh: consume partition", err)
			}
		}))
}

// drain stops pulling from cc and hands what it had buffered to the
// callback, within grace.
func (cs *consumers) drain(cc jetstream.ConsumeContext) {
	cc.Drain()
	select {
	case <-cc.Closed():
	case <-time.After(cs.grace):
		cc.Stop()
	}
}
