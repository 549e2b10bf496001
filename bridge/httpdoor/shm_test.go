package httpdoor_test

import (
	"encoding/json"
	"fmt"
	"net/http"
	"os"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/cluster-serving/cluster-serving/bridge/door"
	"github.com/cluster-serving/cluster-serving/bridge/door/doortest"
	httpdoor "github.com/cluster-serving/cluster-serving/bridge/httpdoor"
	"github.com/cluster-serving/cluster-serving/infer/infertest"
)

// shmDoor runs a door for add_f32 (y = 2x + 1, x [batch, 4] FP32) with
// its own shared memory registry, and returns it with a region file "in"
// holding x = 1..8 (shape [2, 4]) and an empty region file "out", both
// registered over HTTP.
func shmDoor(t *testing.T) (e *env, outPath string) {
	t.Helper()
	infertest.RequireLibrary(t)
	e = startDoor(t, httpdoor.Config{Config: door.Config{SharedMemory: door.NewSharedMemory()}}, served{name: "add", file: "add_f32"})
	inKey, inPath := doortest.SHMFile(t, 64)
	if err := os.WriteFile(inPath, doortest.F32Bytes(1, 2, 3, 4, 5, 6, 7, 8), 0o600); err != nil {
		t.Fatal(err)
	}
	outKey, outPath := doortest.SHMFile(t, 64)
	register(t, e, "in", inKey, 0, 32, 200)
	register(t, e, "out", outKey, 0, 64, 200)
	return e, outPath
}

// register registers region name over HTTP and checks the answer's status.
func register(t *testing.T, e *env, name, key string, offset, size int64, want int) []byte {
	t.Helper()
	st, body := call(t, "POST", e.url+"/v2/systemsharedmemory/region/"+name+"/register",
		fmt.Sprintf(`{"key":%q,"offset":%d,"byte_size":%d}`, key, offset, size))
	if st != want {
		t.Fatalf("register %s: got %d %s, want %d", name, st, body, want)
	}
	return body
}

// want2x1 is y = 2x + 1 of x = 1..8.
var want2x1 = []float32{3, 5, 7, 9, 11, 13, 15, 17}

const shmInput = `{"name":"x","datatype":"FP32","shape":[2,4],"parameters":{"shared_memory_region":"in","shared_memory_byte_size":32}}`

func TestSHMInferHTTP(t *testing.T) {
	e, outPath := shmDoor(t)
	infer := e.url + "/v2/models/add/infer"

	// Input and output in regions: the answer carries the output's name,
	// datatype and shape only; the bytes are in the file.
	st, body := call(t, "POST", infer, `{"inputs":[`+shmInput+`],"outputs":[{"name":"y","parameters":{"shared_memory_region":"out","shared_memory_offset":16,"shared_memory_byte_size":48}}]}`)
	var resp struct {
		Outputs []map[string]json.RawMessage `json:"outputs"`
	}
	if err := json.Unmarshal(body, &resp); st != 200 || err != nil || len(resp.Outputs) != 1 {
		t.Fatalf("infer: got %d %s", st, body)
	}
	o := resp.Outputs[0]
	if o["data"] != nil || string(o["shape"]) != "[2,4]" || o["parameters"] != nil {
		t.Errorf("output: got %s, want shape [2,4], no parameters and no data (as Triton)", body)
	}
	file, _ := os.ReadFile(outPath)
	if got := doortest.F32s(file[16:48]); !slices.Equal(got, want2x1) {
		t.Errorf("region out at 16: got %v, want %v", got, want2x1)
	}

	// The parameter's name spelled with a JSON escape is the same name.
	st, body = call(t, "POST", infer, `{"inputs":[{"name":"x","datatype":"FP32","shape":[2,4],"parameters":{"shared\u005fmemory_region":"in","shared_memory_byte_size":32}}]}`)
	if st != 200 || !strings.Contains(string(body), `"data":[3,5,7,9,11,13,15,17]`) {
		t.Errorf("input in a region, output as JSON: got %d %s", st, body)
	}

	// Input as binary data after the header, output in a region.
	header := `{"inputs":[{"name":"x","datatype":"FP32","shape":[2,4],"parameters":{"binary_data_size":32}}],"outputs":[{"name":"y","parameters":{"shared_memory_region":"out","shared_memory_byte_size":32}}]}`
	req, _ := http.NewRequest("POST", infer, strings.NewReader(header+string(doortest.F32Bytes(8, 7, 6, 5, 4, 3, 2, 1))))
	req.Header.Set("Inference-Header-Content-Length", strconv.Itoa(len(header)))
	if r, body := do(t, req); r.StatusCode != 200 || strings.Contains(string(body), `"data"`) {
		t.Errorf("binary input, output in a region: got %d %s", r.StatusCode, body)
	}
	file, _ = os.ReadFile(outPath)
	if got, want := doortest.F32s(file[:32]), []float32{17, 15, 13, 11, 9, 7, 5, 3}; !slices.Equal(got, want) {
		t.Errorf("region out after a binary input: got %v, want %v", got, want)
	}

	// Input in a region, output as binary data.
	req, _ = http.NewRequest("POST", infer, strings.NewReader(`{"inputs":[`+shmInput+`],"outputs":[{"name":"y","parameters":{"binary_data":true}}]}`))
	r, body := do(t, req)
	n, _ := strconv.Atoi(r.Header.Get("Inference-Header-Content-Length"))
	if r.StatusCode != 200 || n <= 0 || n > len(body) || !slices.Equal(doortest.F32s(body[n:]), want2x1) {
		t.Errorf("output as binary data: got %d %q", r.StatusCode, body)
	}
}

func TestSHMRegistryHTTP(t *testing.T) {
	e, _ := shmDoor(t)
	st, body := call(t, "GET", e.url+"/v2/systemsharedmemory/status", "")
	var regions []door.Region
	if err := json.Unmarshal(body, &regions); st != 200 || err != nil || len(regions) != 2 || regions[0].Name != "in" || regions[1].ByteSize != 64 {
		t.Fatalf("status: got %d %s", st, body)
	}
	if st, body := call(t, "GET", e.url+"/v2/systemsharedmemory/region/out/status", ""); st != 200 || !strings.Contains(string(body), `"name":"out"`) || strings.Contains(string(body), `"in"`) {
		t.Errorf("status of out: got %d %s", st, body)
	}
	if st, _ := call(t, "POST", e.url+"/v2/systemsharedmemory/region/in/unregister", ""); st != 200 {
		t.Errorf("unregister in: got %d", st)
	}
	st, body = call(t, "POST", e.url+"/v2/models/add/infer", `{"inputs":[`+shmInput+`]}`)
	if st != 400 || !strings.Contains(errorOf(t, body), "shared memory region 'in' is not registered") {
		t.Errorf("infer from an unregistered region: got %d %s", st, body)
	}
	if st, _ := call(t, "POST", e.url+"/v2/systemsharedmemory/unregister", ""); st != 200 {
		t.Errorf("unregister all: got %d", st)
	}
	if st, body := call(t, "GET", e.url+"/v2/systemsharedmemory/status", ""); st != 200 || string(body) != "[]" {
		t.Errorf("status after unregister all: got %d %s, want []", st, body)
	}
}

func TestSHMErrorsHTTP(t *testing.T) {
	e, _ := shmDoor(t)
	smallKey, _ := doortest.SHMFile(t, 8)
	register(t, e, "small", smallKey, 0, 8, 200)
	infer := func(inputs, outputs string) string {
		return `{"inputs":[` + inputs + `],"outputs":[` + outputs + `]}`
	}
	x := func(params string) string {
		return `{"name":"x","datatype":"FP32","shape":[2,4],"parameters":{` + params + `}}`
	}
	tests := []struct {
		name, method, path, body string
		st                       int
		want                     string
	}{
		{"unknown region", "POST", "/v2/models/add/infer", infer(x(`"shared_memory_region":"nope","shared_memory_byte_size":32`), ""), 400, "'nope' is not registered"},
		{"input past the region", "POST", "/v2/models/add/infer", infer(x(`"shared_memory_region":"in","shared_memory_offset":16,"shared_memory_byte_size":32`), ""), 400,
			"shared memory region 'in': offset 16 needs 32 bytes, the region has 16 bytes past the offset"},
		{"region too small for the output", "POST", "/v2/models/add/infer", infer(shmInput, `{"name":"y","parameters":{"shared_memory_region":"small","shared_memory_byte_size":8}}`), 400,
			"output y: shared memory region 'small' at offset 0 needs 32 bytes, shared_memory_byte_size gives 8"},
		{"output window past the region", "POST", "/v2/models/add/infer", infer(shmInput, `{"name":"y","parameters":{"shared_memory_region":"small","shared_memory_byte_size":32}}`), 400,
			"shared memory region 'small': offset 0 needs 32 bytes, the region has 8"},
		{"region and data", "POST", "/v2/models/add/infer", `{"inputs":[{"name":"x","datatype":"FP32","shape":[1,4],"data":[1,2,3,4],"parameters":{"shared_memory_region":"in","shared_memory_byte_size":16}}]}`, 400,
			"send its data one way"},
		{"byte size short of the shape", "POST", "/v2/models/add/infer", infer(x(`"shared_memory_region":"in","shared_memory_byte_size":16`), ""), 400, `input "x": raw data has 16 bytes, FP32 of shape [2 4] needs 32`},
		{"region without byte size", "POST", "/v2/models/add/infer", infer(x(`"shared_memory_region":"in"`), ""), 400, "needs shared_memory_byte_size"},
		{"byte size without region", "POST", "/v2/models/add/infer", infer(x(`"shared_memory_byte_size":32`), ""), 400, "need shared_memory_region"},
		{"region not a string", "POST", "/v2/models/add/infer", infer(x(`"shared_memory_region":7,"shared_memory_byte_size":32`), ""), 400, "parameters.shared_memory_region"},
		{"escaping key", "POST", "/v2/systemsharedmemory/region/x/register", `{"key":"../etc/passwd","byte_size":8}`, 400, `invalid key "../etc/passwd"`},
		{"double register", "POST", "/v2/systemsharedmemory/region/in/register", `{"key":"` + smallKey + `","byte_size":8}`, 400, "shared memory region 'in' already in manager"},
		{"register without key", "POST", "/v2/systemsharedmemory/region/x/register", `{"byte_size":8}`, 400, "no 'key' field"},
		{"register without name", "POST", "/v2/systemsharedmemory/register", `{"key":"/x","byte_size":8}`, 400, "'region name' is necessary"},
		{"status of unknown", "GET", "/v2/systemsharedmemory/region/nope/status", "", 404, "Unable to find system shared memory region: 'nope'"},
		{"CUDA register", "POST", "/v2/cudasharedmemory/region/g/register", `{"raw_handle":{"b64":""},"device_id":0,"byte_size":8}`, 400,
			"CUDA shared memory is not supported; use system shared memory"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			st, body := call(t, tt.method, e.url+tt.path, tt.body)
			if st != tt.st || !strings.Contains(errorOf(t, body), tt.want) {
				t.Errorf("got %d %s, want %d and %q", st, body, tt.st, tt.want)
			}
		})
	}
	// A client that clears both kinds of region, as perf_analyzer does.
	if st, body := call(t, "POST", e.url+"/v2/cudasharedmemory/unregister", ""); st != 200 {
		t.Errorf("CUDA unregister all: got %d %s, want 200", st, body)
	}
	if st, body := call(t, "GET", e.url+"/v2/cudasharedmemory/status", ""); st != 200 || string(body) != "[]" {
		t.Errorf("CUDA status: got %d %s, want []", st, body)
	}
}

// Requests from a region while it is unregistered and registered again:
// each answers 200 or 400 "not registered", and the door lives on.
func TestSHMUnregisterInFlightHTTP(t *testing.T) {
	e, _ := shmDoor(t)
	inKey, inPath := doortest.SHMFile(t, 32)
	if err := os.WriteFile(inPath, doortest.F32Bytes(1, 2, 3, 4, 5, 6, 7, 8), 0o600); err != nil {
		t.Fatal(err)
	}
	body := strings.ReplaceAll(`{"inputs":[`+shmInput+`],"outputs":[{"name":"y","parameters":{"shared_memory_region":"out","shared_memory_byte_size":32}}]}`, `"in"`, `"flip"`)
	var wg sync.WaitGroup
	var stop atomic.Bool
	for range 4 {
		wg.Go(func() {
			for !stop.Load() {
				st, b := call(t, "POST", e.url+"/v2/models/add/infer", body)
				if st != 200 && (st != 400 || !strings.Contains(string(b), "is not registered")) {
					t.Errorf("infer during unregister: got %d %s", st, b)
				}
			}
		})
	}
	for range 50 {
		register(t, e, "flip", inKey, 0, 32, 200)
		call(t, "POST", e.url+"/v2/systemsharedmemory/region/flip/unregister", "")
	}
	stop.Store(true)
	wg.Wait()
	if st, _ := call(t, "GET", e.url+"/v2/health/live", ""); st != 200 {
		t.Errorf("live after: got %d", st)
	}
}

// Registering needs an admin token: it makes the door map a host file.
func TestSHMRoles(t *testing.T) {
	e, _, _ := tokenDoor(t, httpdoor.Config{Config: door.Config{SharedMemory: door.NewSharedMemory()}})
	for _, tc := range []struct {
		method, path string
		want         int
	}{
		{"POST", "/v2/systemsharedmemory/region/r/register", 403},
		{"POST", "/v2/systemsharedmemory/unregister", 403},
		{"POST", "/v2/systemsharedmemory/region/r/unregister", 403},
		{"POST", "/v2/cudasharedmemory/unregister", 403},
		{"GET", "/v2/systemsharedmemory/status", 200},
	} {
		st, _, body, err := send(httpClient, tc.method, e.url+tc.path, "Bearer "+oldToken, `{"key":"/x","byte_size":8}`)
		if err != nil || st != tc.want {
			t.Errorf("%s %s with an infer token: got %d %s %v, want %d", tc.method, tc.path, st, body, err, tc.want)
		}
	}
}

// A region may not make the request the door queues larger than a body
// may be: 413, before the door reads it.
func TestSHMBodyLimitHTTP(t *testing.T) {
	infertest.RequireLibrary(t)
	e := startDoor(t, httpdoor.Config{MaxBodyBytes: 1024, Config: door.Config{SharedMemory: door.NewSharedMemory()}}, served{name: "add", file: "add_f32"})
	key, _ := doortest.SHMFile(t, 4096)
	register(t, e, "big", key, 0, 4096, 200)
	st, body := call(t, "POST", e.url+"/v2/models/add/infer",
		`{"inputs":[{"name":"x","datatype":"FP32","shape":[256,4],"parameters":{"shared_memory_region":"big","shared_memory_byte_size":4096}}]}`)
	if st != 413 || !strings.Contains(errorOf(t, body), "over the 1024 of httpMaxBodyBytes") {
		t.Errorf("got %d %s, want 413 naming httpMaxBodyBytes", st, body)
	}
}
