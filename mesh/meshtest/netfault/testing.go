package netfault

import "testing"

// ListenForTest starts a Proxy to target on a free loopback port for one
// test, closed at cleanup; with no target it refuses every connection
// until SetTarget (see Listen).
func ListenForTest(tb testing.TB, target string) *Proxy {
	tb.Helper()
	p, err := Listen("127.0.0.1:0", target)
	if err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(func() { _ = p.Close() })
	return p
}
