package httpdoor_test

import (
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/cluster-serving/cluster-serving/embedded/tlstest"
	"github.com/cluster-serving/cluster-serving/infer/infertest"

	"github.com/nats-io/nats.go"

	"github.com/cluster-serving/cluster-serving/bridge/door"
	httpdoor "github.com/cluster-serving/cluster-serving/bridge/httpdoor"
	"github.com/cluster-serving/cluster-serving/mesh"
)

// BenchmarkDoors compares one /predict round trip on the tiny add_f32
// model through the HTTP door and through the NATS door (micro endpoint),
// with 32 concurrent callers each.
func BenchmarkDoors(b *testing.B) {
	infertest.RequireLibrary(b)
	const body = `{"instances":[{"x":[1,2,3,4]}]}`
	e := startDoor(b, httpdoor.Config{}, served{name: "add", file: "add_f32"})
	b.Run("http", func(b *testing.B) { postParallel(b, httpClient, e.url+"/predict", "", body) })
	b.Run("nats", func(b *testing.B) {
		svc, err := mesh.NewService(e.nc, e.client, mesh.ServiceConfig{Jobs: []string{"add"}})
		if err != nil {
			b.Fatal(err)
		}
		stop := make(chan struct{})
		done := make(chan error, 1)
		go func() { done <- svc.Run(ctxUntil(stop)) }()
		defer func() { close(stop); <-done }()
		nc, err := nats.Connect(e.nc.ConnectedUrl())
		if err != nil {
			b.Fatal(err)
		}
		defer nc.Close()
		waitService(b, nc)
		b.SetParallelism(32 / max(1, runtimeProcs()))
		b.ResetTimer()
		b.RunParallel(func(pb *testing.PB) {
			for pb.Next() {
				m, err := nc.Request(mesh.PredictSubject("add"), []byte(body), 10*time.Second)
				if err != nil || m.Header.Get("Nats-Service-Error-Code") != "" {
					b.Errorf("request: %v %v", err, m)
					return
				}
			}
		})
	})
}

// BenchmarkSecureDoor compares one /predict round trip on add_f32, 32
// callers on keep-alive connections, through a plain door and through a
// door with HTTPS, required client certificates and a bearer token: the
// cost of the security options, as a ratio of the two in one run.
func BenchmarkSecureDoor(b *testing.B) {
	infertest.RequireLibrary(b)
	pki := tlstest.New(b, "bench")
	tokens := filepath.Join(b.TempDir(), "tokens")
	if err := os.WriteFile(tokens, []byte("bench-token\n"), 0o600); err != nil {
		b.Fatal(err)
	}
	plain := startDoor(b, httpdoor.Config{}, served{name: "add", file: "add_f32"})
	secure := startDoor(b, httpdoor.Config{Config: door.Config{TLSCertFile: pki.ServerCert, TLSKeyFile: pki.ServerKey,
		TLSClientCAFile: pki.CA, TokenFile: tokens}}, served{name: "add", file: "add_f32"})
	for _, tc := range []struct {
		name, url, token string
		client           *http.Client
	}{
		{"plain", plain.url, "", &http.Client{Transport: &http.Transport{MaxIdleConnsPerHost: 64}}},
		{"https+mtls+token", secure.url, "bench-token", &http.Client{Transport: &http.Transport{
			MaxIdleConnsPerHost: 64, TLSClientConfig: pki.ClientTLS(b, true)}}},
	} {
		b.Run(tc.name, func(b *testing.B) {
			postParallel(b, tc.client, tc.url+"/predict", tc.token, `{"instances":[{"x":[1,2,3,4]}]}`)
		})
	}
}

// postParallel POSTs body to url from 32 callers until b.N requests are
// answered, each with the bearer token when one is given; any answer but
// 200 fails the benchmark.
func postParallel(b *testing.B, client *http.Client, url, token, body string) {
	b.SetParallelism(32 / max(1, runtimeProcs()))
	b.ResetTimer()
	b.RunParallel(func(pb *testing.PB) {
		for pb.Next() {
			req, _ := http.NewRequest(http.MethodPost, url, strings.NewReader(body))
			req.Header.Set("Content-Type", "application/json")
			if token != "" {
				req.Header.Set("Authorization", "Bearer "+token)
			}
			resp, err := client.Do(req)
			if err != nil {
				b.Error(err)
				return
			}
			_, _ = io.Copy(io.Discard, resp.Body)
			resp.Body.Close()
			if resp.StatusCode != http.StatusOK {
				b.Errorf("status %d", resp.StatusCode)
				return
			}
		}
	})
}
