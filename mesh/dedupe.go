package mesh

import "time"

// maxRecentIDs bounds the memory of recentIDs: about 100 bytes an id.
const maxRecentIDs = 1 << 16

// recentIDs remembers the Nats-Msg-Id of results written lately, for
// window, so that a results consumer writes a result once even when it was
// stored twice: a worker's publish that timed out after its partition had
// stored it, retried on another partition (JetStream's own dedupe is per
// stream). It holds at most max ids; past that it forgets the oldest
// first, early. Not safe for concurrent use.
type recentIDs struct {
	window time.Duration
	max    int
	seen   map[string]time.Time
	queue  []seenID // in the order added, from head on
	head   int
}

type seenID struct {
	id string
	at time.Time
}

func newRecentIDs(window time.Duration, max int) *recentIDs {
	return &recentIDs{window: window, max: max, seen: map[string]time.Time{}}
}

// has reports whether id was added within window before now.
func (r *recentIDs) has(id string, now time.Time) bool {
	at, ok := r.seen[id]
	return ok && now.Sub(at) < r.window
}

// add remembers id as written at now, and forgets what is older than
// window or past max.
func (r *recentIDs) add(id string, now time.Time) {
	if id == "" {
		return
	}
	r.queue = append(r.queue, seenID{id, now})
	r.seen[id] = now
	for r.head < len(r.queue) && (len(r.queue)-r.head > r.max || now.Sub(r.queue[r.head].at) >= r.window) {
		e := r.queue[r.head]
		if r.seen[e.id].Equal(e.at) {
			delete(r.seen, e.id) // not when re-added since
		}
		r.queue[r.head] = seenID{}
		r.head++
	}
	if r.head > len(r.queue)/2 {
		r.queue = append(r.queue[:0], r.queue[r.head:]...)
		r.head = 0
	}
}

// len reports how many ids are remembered.
func (r *recentIDs) len() int { return len(r.seen) }
