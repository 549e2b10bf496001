package respdoor

import (
	"strconv"
	"sync"
	"time"
)

// idGen assigns stream entry ids as Redis does: <ms>-<seq>, the
// millisecond of the XADD and a sequence within it, always rising (a
// clock that steps back keeps the last millisecond).
type idGen struct {
	mu      sync.Mutex
	ms, seq int64
}

func (g *idGen) next() string {
	g.mu.Lock()
	defer g.mu.Unlock()
	if now := time.Now().UnixMilli(); now > g.ms {
		g.ms, g.seq = now, 0
	} else {
		g.seq++
	}
	return strconv.FormatInt(g.ms, 10) + "-" + strconv.FormatInt(g.seq, 10)
}
