package infer

import (
	"context"
	"sync/atomic"
	"time"
)

// DefaultGroupWait is BatcherConfig.GroupWait's default: how long a
// runner waits for news of a group (a member arriving or leaving)
// before it runs what came.
//
// Why 1 ms: the requests of one coalesced work message reach the
// batcher one decode apart, a few µs to tens of µs for small records;
// the wait only runs out for a request that leaves its group without
// the batcher hearing of it (see Member.Leave), or one that takes long
// to decode (a 224×224 image: about 4 ms), whose group then runs in a
// few runs instead of one.
const DefaultGroupWait = time.Millisecond

// Group is the requests of one coalesced work message (several callers'
// requests that a door stored, and a worker took, as one), on their way
// to one Batcher. A Batcher's runner that takes a record of a group some
// of whose requests are still coming waits for them while they come:
// until GroupWait passes with no news of the group (a member arriving or
// leaving), so at most n × GroupWait for a group of n, and never past a
// full batch. So the group runs as one model run instead of one run per
// request. A lone request has no group and never waits.
//
// Each request of a group is a Member: it arrives when its records are
// submitted (Batcher.Submit, Engine.Infer with its ctx), or leaves when
// it will not be (a decode error, an expired deadline, a request that
// waits for something else first): whoever knows calls Member.Leave, so
// that the others stop waiting for it. Safe for concurrent use.
type Group struct {
	coming atomic.Int64 // members neither arrived nor gone
	news   atomic.Int64 // when a member last arrived or left, Unix ns
	// b is the Batcher the first member reached: Leave wakes its
	// runners, which may wait for the member that left.
	b atomic.Pointer[Batcher]
}

// Member is one request of a Group. Safe for concurrent use; the nil
// Member (a request without a group) does nothing.
type Member struct {
	g    *Group
	done atomic.Bool // arrived or gone: counted out of g.coming
}

type memberKey struct{}

// NewGroup returns the group of n requests, or nil when n < 2: a lone
// request waits for nobody.
func NewGroup(n int) *Group {
	if n < 2 {
		return nil
	}
	g := &Group{}
	g.coming.Store(int64(n))
	return g
}

// Member returns ctx carrying a new member of g, and the member. Call it
// once per request, at most the n of NewGroup times. A nil g returns ctx
// and a nil Member.
func (g *Group) Member(ctx context.Context) (context.Context, *Member) {
	if g == nil {
		return ctx, nil
	}
	m := &Member{g: g}
	return context.WithValue(ctx, memberKey{}, m), m
}

// Leave says that m will not reach the batcher (again): its group's
// other requests stop waiting for it. It does nothing once m arrived or
// left, so a caller may call it whenever the request is done, whatever
// happened to it.
func (m *Member) Leave() {
	if m == nil || m.done.Swap(true) {
		return
	}
	m.g.news.Store(time.Now().UnixNano())
	m.g.coming.Add(-1)
	if b := m.g.b.Load(); b != nil {
		b.poke()
	}
}

// memberOf returns ctx's Member, or nil.
func memberOf(ctx context.Context) *Member {
	m, _ := ctx.Value(memberKey{}).(*Member)
	return m
}

// arrive counts m in at b at now and returns its group, or nil when m
// is nil or was counted already (it left, or an earlier chunk of its
// request arrived): such records wait for no one.
func (m *Member) arrive(b *Batcher, now time.Time) *Group {
	if m == nil || m.done.Swap(true) {
		return nil
	}
	m.g.b.Store(b) // before the count: a Leave that sees the count sees b
	m.g.news.Store(now.UnixNano())
	m.g.coming.Add(-1)
	return m.g
}

// waiting reports whether members of g are still coming; false for nil.
func (g *Group) waiting() bool {
	return g != nil && g.coming.Load() > 0
}

// until is when a runner waiting for g gives up: wait after its latest
// news.
func (g *Group) until(wait time.Duration) time.Time {
	return time.Unix(0, g.news.Load()).Add(wait)
}
