package grpcdoor_test

import (
	"net"
	"os"
	"path/filepath"
	"sync/atomic"
	"testing"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"

	"github.com/cluster-serving/cluster-serving/bridge/door"
	grpcdoor "github.com/cluster-serving/cluster-serving/bridge/grpcdoor"
	"github.com/cluster-serving/cluster-serving/infer/wire/kservepb"
)

// countingListener counts the bytes the server reads from its
// connections.
type countingListener struct {
	net.Listener
	read *atomic.Int64
}

func (l countingListener) Accept() (net.Conn, error) {
	c, err := l.Listener.Accept()
	if err != nil {
		return nil, err
	}
	return countingConn{c, l.read}, nil
}

type countingConn struct {
	net.Conn
	read *atomic.Int64
}

func (c countingConn) Read(p []byte) (int, error) {
	n, err := c.Conn.Read(p)
	c.read.Add(int64(n))
	return n, err
}

// TestTokenCheckedBeforeTheMessageIsRead: a caller without a token that
// sends an 8 MiB message is refused with Unauthenticated while the server
// has read no more than the HTTP/2 flow-control window of it; a caller
// with the token gets the same message read whole (which shows the
// count sees a message when one is read).
func TestTokenCheckedBeforeTheMessageIsRead(t *testing.T) {
	tokens := filepath.Join(t.TempDir(), "tokens")
	if err := os.WriteFile(tokens, []byte("s3cret-token\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	var read atomic.Int64
	addr, _ := startDoorOn(t, countingListener{ln, &read}, grpcdoor.Config{Config: door.Config{TokenFile: tokens}, MaxRecvBytes: 32 << 20},
		served{name: "add", file: "add_f32"})
	const size = 8 << 20
	req := &kservepb.ModelInferRequest{ModelName: "add", RawInputContents: [][]byte{make([]byte, size)}}
	big := grpc.MaxCallSendMsgSize(size + 1<<20)

	before := read.Load()
	_, err = inferClient(t, addr).ModelInfer(callCtx(t), req, big)
	if status.Code(err) != codes.Unauthenticated {
		t.Fatalf("no token: got %v, want Unauthenticated", err)
	}
	if got := read.Load() - before; got > 1<<20 {
		t.Errorf("no token: the server read %d bytes, want at most 1 MiB of the %d-byte message", got, size)
	}

	before = read.Load()
	ctx := metadata.AppendToOutgoingContext(callCtx(t), "authorization", "Bearer s3cret-token")
	_, err = inferClient(t, addr).ModelInfer(ctx, req, big)
	if status.Code(err) == codes.Unauthenticated {
		t.Fatalf("with the token: got %v", err)
	}
	if got := read.Load() - before; got < size {
		t.Errorf("with the token: the server read %d bytes, want the whole %d-byte message", got, size)
	}
}
