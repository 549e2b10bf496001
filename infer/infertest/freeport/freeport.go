// Package freeport finds free loopback TCP ports for the servers that
// tests, the fault suite and the bench start. It does not import testing,
// so the bench (part of the binary) can use it; tests use
// infertest.FreePorts.
package freeport

import "net"

// Take asks the kernel for n distinct free loopback ports. It holds each
// one open until it has all n, so that none is handed out twice; a port
// may still be taken by someone else before its server binds it.
func Take(n int) ([]int, error) {
	ports := make([]int, n)
	for i := range ports {
		l, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			return nil, err
		}
		defer l.Close()
		ports[i] = l.Addr().(*net.TCPAddr).Port
	}
	return ports, nil
}
