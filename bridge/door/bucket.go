package door

import (
	"context"
	"time"

	"github.com/cluster-serving/cluster-serving/infer/status"

	"golang.org/x/time/rate"
)

// TokenBucket is a door's rate limit in front of inference (config keys
// tokenBucketEnabled, tokensPerSecond, tokenAcquireTimeout): perSecond
// tokens a second, a burst of max(1, perSecond). The HTTP and gRPC doors
// each hold one. It is safe for concurrent use; a nil *TokenBucket lets
// every request through.
type TokenBucket struct {
	limiter   *rate.Limiter
	perSecond float64
	acquire   time.Duration
}

// NewTokenBucket returns the bucket of perSecond tokens a second, which
// waits at most acquire for one; nil (no limit) when perSecond <= 0.
func NewTokenBucket(perSecond float64, acquire time.Duration) *TokenBucket {
	if perSecond <= 0 {
		return nil
	}
	return &TokenBucket{limiter: rate.NewLimiter(rate.Limit(perSecond), max(1, int(perSecond))), perSecond: perSecond, acquire: acquire}
}

// Take waits for a token, at most the acquire timeout (or until ctx
// ends); without one in time it returns a 429 *status.Error (HTTP 429, gRPC
// ResourceExhausted). A wait that cannot end in time fails at once.
func (b *TokenBucket) Take(ctx context.Context) error {
	if b == nil {
		return nil
	}
	ctx, cancel := context.WithTimeout(ctx, b.acquire)
	defer cancel()
	if err := b.limiter.Wait(ctx); err != nil {
		return status.Errorf(status.TooManyRequests, "too many requests: no token within %v (tokensPerSecond %g)", b.acquire, b.perSecond)
	}
	return nil
}
