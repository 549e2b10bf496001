package grpcdoor

import (
	"context"
	"net"

	"google.golang.org/grpc/stats"
)

// connKey keys the door.Listener connection of a gRPC connection's ctx.
type connKey struct{}

// connStats is a stats.Handler that tells the door's listener which
// connections have an RPC in flight, so that it sheds only idle ones.
// Its methods run on gRPC's goroutines and are safe for concurrent use.
type connStats struct{ d *Door }

// TagConn finds the listener's connection by its remote address.
func (h connStats) TagConn(ctx context.Context, info *stats.ConnTagInfo) context.Context {
	if h.d.conns == nil || info.RemoteAddr == nil {
		return ctx
	}
	if c := h.d.conns.Lookup(info.RemoteAddr); c != nil {
		return context.WithValue(ctx, connKey{}, c)
	}
	return ctx
}

func (connStats) HandleConn(context.Context, stats.ConnStats) {}

func (connStats) TagRPC(ctx context.Context, _ *stats.RPCTagInfo) context.Context { return ctx }

// HandleRPC counts an RPC on its connection from Begin to End.
func (h connStats) HandleRPC(ctx context.Context, s stats.RPCStats) {
	c, _ := ctx.Value(connKey{}).(net.Conn)
	if c == nil {
		return
	}
	switch s.(type) {
	case *stats.Begin:
		h.d.conns.Begin(c)
	case *stats.End:
		h.d.conns.End(c)
	}
}
