package httpdoor

import (
	"bytes"
	"encoding/json"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/cluster-serving/cluster-serving/bridge/door"
	"github.com/cluster-serving/cluster-serving/bridge/door/doortest"
	"github.com/cluster-serving/cluster-serving/infer/wire"
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

// FuzzPlanSHM: planSHM never panics on a request (its JSON header, then
// binary data), and a request it rewrites is framed binary with a JSON
// header.
func FuzzPlanSHM(f *testing.F) {
	for _, s := range []string{
		`{"inputs":[{"name":"x","datatype":"FP32","shape":[2,4],"parameters":{"shared_memory_region":"r","shared_memory_byte_size":32}}]}`,
		`{"inputs":[{"name":"x","parameters":{"binary_data_size":4}}],"outputs":[{"name":"y","parameters":{"shared_memory_region":"r","shared_memory_offset":4,"shared_memory_byte_size":8}}]}abcd`,
		`{"inputs":[{"name":"x","parameters":{"shared\u005fmemory_region":"r","shared_memory_byte_size":-1}}]}`,
		`{"inputs":null,"outputs":[{"parameters":null}]}`,
	} {
		f.Add([]byte(s))
	}
	reg := door.NewSharedMemory()
	key, _ := doortest.SHMFile(f, 64)
	if err := reg.Register("r", key, 0, 64); err != nil {
		f.Fatal(err)
	}
	f.Fuzz(func(t *testing.T, body []byte) {
		headerLen := len(body)
		var probe json.RawMessage
		if dec := json.NewDecoder(bytes.NewReader(body)); dec.Decode(&probe) == nil {
			headerLen = int(dec.InputOffset())
		}
		plan, err := planSHM(reg, body, headerLen, 1<<20)
		if err != nil || plan == nil {
			return
		}
		header, _, err := wire.SplitOIPBinary(plan.body)
		var top map[string]json.RawMessage
		if err != nil || json.Unmarshal(header, &top) != nil {
			t.Fatalf("rewritten %q: header %q %v", body, header, err)
		}
	})
}
