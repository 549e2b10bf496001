package redis

import goredis "github.com/redis/go-redis/v9"

// Client exposes the door's Redis client so tests can hook it.
func (d *Door) Client() *goredis.Client { return d.rdb }
