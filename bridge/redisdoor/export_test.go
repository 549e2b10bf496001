package redisdoor

import (
	"sync"

	goredis "github.com/redis/go-redis/v9"
)

// Client exposes the door's Redis client so tests can hook it.
func (d *Door) Client() *goredis.Client { return d.rdb }

// ResetGoredisLog lets the next New with a logger route go-redis's log
// again, so a test can see where go-redis's lines go.
func ResetGoredisLog() { goredisLogOnce = sync.Once{} }
