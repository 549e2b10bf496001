package httpdoor

import (
	"bytes"
	"net/http/httptest"
	"strings"
	"testing"
)

// BenchmarkSHMCheck is what a request without shared memory pays for the
// extension (inferSHM's header length and scan), beside the scan for
// binary_data that infer already does, on a 4 MiB OIP JSON body.
func BenchmarkSHMCheck(b *testing.B) {
	body := []byte(`{"inputs":[{"name":"x","datatype":"FP32","shape":[1,1000000],"data":[` + strings.Repeat("0.123,", 700000) + `1]}]}`)
	r := httptest.NewRequest("POST", "/v2/models/m/infer", nil)
	b.Run("shm", func(b *testing.B) {
		b.SetBytes(int64(len(body)))
		for b.Loop() {
			if (&Server{}).inferSHM(nil, r, Model{}, body) {
				b.Fatal("took a body without shared memory")
			}
		}
	})
	b.Run("binary_data", func(b *testing.B) {
		b.SetBytes(int64(len(body)))
		for b.Loop() {
			if bytes.Contains(body, []byte("binary_data")) {
				b.Fatal("found binary_data")
			}
		}
	})
}
