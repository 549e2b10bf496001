package redisdoor

import (
	"context"
	"fmt"
	"log/slog"
	"sync"

	goredis "github.com/redis/go-redis/v9"

	"github.com/cluster-serving/cluster-serving/telemetry"
)

// goredisLogOnce guards redis.SetLogger, which is process-global.
var goredisLogOnce sync.Once

// routeGoredisLog makes go-redis write its own lines (connection pool,
// reconnects) through logger at warn with component=go-redis, once per
// cause with a count, instead of as unstructured lines on stderr. go-redis
// has one logger per process: the first Door made with a logger sets it,
// and later ones leave it as it is.
func routeGoredisLog(logger *slog.Logger) {
	goredisLogOnce.Do(func() {
		goredis.SetLogger(goredisLog{telemetry.NewLogLimit(logger.With("component", "go-redis"), 0)})
	})
}

// goredisLog is go-redis's Logging interface on a LogLimit.
type goredisLog struct{ lim *telemetry.LogLimit }

// Printf logs one go-redis line; the line is the cause, numbers aside.
func (g goredisLog) Printf(ctx context.Context, format string, v ...any) {
	if ctx == nil {
		ctx = context.Background()
	}
	g.lim.Log(ctx, slog.LevelWarn, "go-redis", fmt.Errorf(format, v...))
}
