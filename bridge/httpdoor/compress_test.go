package httpdoor_test

import (
	"bytes"
	"compress/flate"
	"compress/gzip"
	"compress/zlib"
	"fmt"
	"io"
	"net/http"
	"runtime"
	"strconv"
	"strings"
	"testing"

	httpdoor "github.com/cluster-serving/cluster-serving/bridge/httpdoor"
	"github.com/cluster-serving/cluster-serving/infer"
	"github.com/cluster-serving/cluster-serving/infer/infertest"
	"github.com/cluster-serving/cluster-serving/infer/wire"
)

// compress encodes b as coding: "gzip", "deflate" (zlib-wrapped, as
// Python's zlib.compress in tritonclient) or "raw deflate".
func compress(tb testing.TB, coding string, b []byte) []byte {
	tb.Helper()
	var buf bytes.Buffer
	var w io.WriteCloser
	switch coding {
	case "gzip":
		w = gzip.NewWriter(&buf)
	case "deflate":
		w = zlib.NewWriter(&buf)
	case "raw deflate":
		w, _ = flate.NewWriter(&buf, flate.DefaultCompression)
	default:
		tb.Fatalf("no coding %q", coding)
	}
	if _, err := w.Write(b); err != nil {
		tb.Fatal(err)
	}
	if err := w.Close(); err != nil {
		tb.Fatal(err)
	}
	return buf.Bytes()
}

// post sends body to url under the given headers (name, value, ...) and
// returns the answer; an Accept-Encoding among them keeps the transport
// from decoding the answer.
func post(tb testing.TB, url string, body []byte, headers ...string) (*http.Response, []byte) {
	tb.Helper()
	req, err := http.NewRequest("POST", url, bytes.NewReader(body))
	if err != nil {
		tb.Fatal(err)
	}
	for i := 0; i+1 < len(headers); i += 2 {
		req.Header.Set(headers[i], headers[i+1])
	}
	return do(tb, req)
}

// TestCompressedRequests: over the real mesh, JSON, /predict and binary
// extension bodies sent gzip, deflate (zlib) or raw deflate answer what
// the same body sent plain answers; Inference-Header-Content-Length
// counts the decompressed bytes.
func TestCompressedRequests(t *testing.T) {
	infertest.RequireLibrary(t)
	e := startDoor(t, httpdoor.Config{}, served{name: "two", file: "two_io"})
	jsonBody := `{"id":"q","inputs":[{"name":"a","datatype":"FP32","shape":[2,3],"data":[1,2,3,4,5,6]},{"name":"b","datatype":"FP32","shape":[2,3],"data":[1,1,1,2,2,2]}]}`
	a := wire.AppendRaw(nil, infer.Tensor{DType: infer.Float32, Shape: []int64{2, 3}, Data: []float32{1, 2, 3, 4, 5, 6}})
	header := `{"id":"q","inputs":[{"name":"a","datatype":"FP32","shape":[2,3],"parameters":{"binary_data_size":24}},{"name":"b","datatype":"FP32","shape":[2,3],"data":[1,1,1,2,2,2]}],"outputs":[{"name":"sum","parameters":{"binary_data":true}}]}`
	binBody := append([]byte(header), a...)
	predictBody := `{"instances":[{"a":[1,2,3],"b":[1,1,1]}]}`
	cases := []struct {
		name, path string
		body       []byte
		headers    []string
	}{
		{"OIP JSON", "/v2/models/two/infer", []byte(jsonBody), nil},
		{"binary extension", "/v2/models/two/infer", binBody, []string{wire.HeaderInferenceContentLength, strconv.Itoa(len(header))}},
		{"predict", "/predict", []byte(predictBody), nil},
	}
	for _, c := range cases {
		plain, want := post(t, e.url+c.path, c.body, append(c.headers, "Accept-Encoding", "identity")...)
		if plain.StatusCode != 200 {
			t.Fatalf("%s plain: got %d %s", c.name, plain.StatusCode, want)
		}
		for _, coding := range []string{"gzip", "deflate", "raw deflate"} {
			t.Run(c.name+" "+coding, func(t *testing.T) {
				hdr := append([]string{"Content-Encoding", strings.TrimPrefix(coding, "raw "), "Accept-Encoding", "identity"}, c.headers...)
				resp, got := post(t, e.url+c.path, compress(t, coding, c.body), hdr...)
				if resp.StatusCode != 200 || !bytes.Equal(got, want) ||
					resp.Header.Get(wire.HeaderInferenceContentLength) != plain.Header.Get(wire.HeaderInferenceContentLength) {
					t.Errorf("got %d %v %q, want 200 %v %q as sent plain", resp.StatusCode, resp.Header, got, plain.Header, want)
				}
			})
		}
	}
}

// TestCompressedRequestErrors: an unknown coding is a 415 naming the
// supported ones; a corrupt or cut stream is a 400 naming the coding.
func TestCompressedRequestErrors(t *testing.T) {
	infertest.RequireLibrary(t)
	e := startDoor(t, httpdoor.Config{}, served{name: "add", file: "add_f32"})
	body := []byte(`{"inputs":[{"name":"x","datatype":"FP32","shape":[1,4],"data":[1,2,3,4]}]}`)
	gz := compress(t, "gzip", body)
	flipped := bytes.Clone(gz)
	flipped[len(flipped)-6] ^= 0xff // the CRC-32
	zl := compress(t, "deflate", body)
	tests := []struct {
		name, coding string
		body         []byte
		st           int
		want         string
	}{
		{"brotli", "br", body, 415, `Content-Encoding "br" is not supported: send the body as one of gzip, deflate (zlib or raw) or identity`},
		{"two codings", "gzip, gzip", compress(t, "gzip", gz), 415, "is not supported"},
		{"not gzip", "gzip", body, 400, "Content-Encoding gzip: gzip: invalid header"},
		{"gzip cut short", "gzip", gz[:len(gz)/2], 400, "Content-Encoding gzip: unexpected EOF"},
		{"gzip bad checksum", "gzip", flipped, 400, "Content-Encoding gzip: gzip: invalid checksum"},
		{"zlib cut short", "deflate", zl[:len(zl)-2], 400, "Content-Encoding deflate: unexpected EOF"},
		{"identity", "identity", body, 200, ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			resp, b := post(t, e.url+"/v2/models/add/infer", tt.body, "Content-Encoding", tt.coding)
			if resp.StatusCode != tt.st {
				t.Fatalf("got %d %s, want %d", resp.StatusCode, b, tt.st)
			}
			if tt.want != "" && !strings.Contains(errorOf(t, b), tt.want) {
				t.Errorf("got %s, want an error containing %q", b, tt.want)
			}
		})
	}
}

// TestGzipBomb: 1 GiB of zeros in about 1 MiB of gzip (1,024 members of
// 1 MiB each, which gzip readers decode as one stream) is a 413 against
// a 4 MiB MaxBodyBytes, and the process allocates nowhere near the
// decompressed size while the door refuses it.
func TestGzipBomb(t *testing.T) {
	infertest.RequireLibrary(t)
	const limit = 4 << 20
	e := startDoor(t, httpdoor.Config{MaxBodyBytes: limit}, served{name: "add", file: "add_f32"})
	member := compress(t, "gzip", make([]byte, 1<<20))
	bomb := bytes.Repeat(member, 1024)
	if len(bomb) >= limit {
		t.Fatalf("the bomb is %d bytes on the wire, want it under the %d-byte limit", len(bomb), limit)
	}
	var before, after runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&before)
	resp, b := post(t, e.url+"/v2/models/add/infer", bomb, "Content-Encoding", "gzip")
	runtime.ReadMemStats(&after)
	if resp.StatusCode != http.StatusRequestEntityTooLarge || !strings.Contains(errorOf(t, b), fmt.Sprintf("larger than %d bytes", limit)) {
		t.Fatalf("got %d %s, want 413", resp.StatusCode, b)
	}
	alloc := after.TotalAlloc - before.TotalAlloc
	t.Logf("%d-byte bomb: 413, %d bytes allocated meanwhile", len(bomb), alloc)
	if alloc > 64<<20 {
		t.Errorf("allocated %d bytes answering a bomb against a %d-byte limit: want well under its 1 GiB", alloc, limit)
	}
}

// TestCompressedAnswers: Accept-Encoding gzip or deflate (q > 0, the
// higher q winning) gets a 200 inference answer, JSON or binary, in that
// coding, decoding to the plain answer; short answers, error answers and
// q=0 go plain; every one says Vary: Accept-Encoding.
func TestCompressedAnswers(t *testing.T) {
	infertest.RequireLibrary(t)
	e := startDoor(t, httpdoor.Config{}, served{name: "add", file: "add_f32"})
	rows := make([]string, 64)
	for i := range rows {
		rows[i] = fmt.Sprintf("%d.5,2,3,4", i)
	}
	big := `{"inputs":[{"name":"x","datatype":"FP32","shape":[64,4],"data":[` + strings.Join(rows, ",") + `]}]}`
	small := `{"inputs":[{"name":"x","datatype":"FP32","shape":[1,4],"data":[1,2,3,4]}]}`
	binary := strings.Replace(big, `]}]}`, `]}],"outputs":[{"name":"y","parameters":{"binary_data":true}}]}`, 1)
	tests := []struct {
		name, body, accept, coding string
		st                         int
	}{
		{"gzip", big, "gzip", "gzip", 200},
		{"deflate", big, "deflate", "deflate", 200},
		{"both: gzip", big, "deflate, gzip", "gzip", 200},
		{"higher q", big, "gzip;q=0.5, deflate;q=0.8", "deflate", 200},
		{"gzip refused", big, "gzip;q=0, deflate", "deflate", 200},
		{"star", big, "*", "gzip", 200},
		{"star, gzip refused", big, "gzip;q=0, *;q=0.1", "deflate", 200},
		{"all refused", big, "gzip;q=0, deflate;q=0", "", 200},
		{"unknown only", big, "br", "", 200},
		{"binary outputs", binary, "gzip", "gzip", 200},
		{"short answer", small, "gzip", "", 200},
		{"error answer", `{"inputs":[{"name":"x","datatype":"FP32","shape":[64,4],"data":[` + strings.Repeat("1,", 600) + `1]}]}`, "gzip", "", 400},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			plain, want := post(t, e.url+"/v2/models/add/infer", []byte(tt.body), "Accept-Encoding", "identity")
			resp, got := post(t, e.url+"/v2/models/add/infer", []byte(tt.body), "Accept-Encoding", tt.accept)
			if resp.StatusCode != tt.st || plain.StatusCode != tt.st || resp.Header.Get("Content-Encoding") != tt.coding ||
				!strings.Contains(resp.Header.Get("Vary"), "Accept-Encoding") {
				t.Fatalf("got %d %v, want %d Content-Encoding %q and Vary", resp.StatusCode, resp.Header, tt.st, tt.coding)
			}
			if tt.coding != "" {
				t.Logf("%d bytes plain, %d bytes %s", len(want), len(got), tt.coding)
			}
			got = decompress(t, tt.coding, got)
			if !bytes.Equal(got, want) || resp.Header.Get(wire.HeaderInferenceContentLength) != plain.Header.Get(wire.HeaderInferenceContentLength) ||
				resp.Header.Get("Content-Type") != plain.Header.Get("Content-Type") {
				t.Errorf("decoded: got %v %.200q, want %v %.200q", resp.Header, got, plain.Header, want)
			}
		})
	}
}

// decompress decodes an answer body of coding ("": none).
func decompress(tb testing.TB, coding string, b []byte) []byte {
	tb.Helper()
	var r io.Reader
	var err error
	switch coding {
	case "":
		return b
	case "gzip":
		r, err = gzip.NewReader(bytes.NewReader(b))
	case "deflate": // what tritonclient's zlib.decompress reads
		r, err = zlib.NewReader(bytes.NewReader(b))
	}
	if err != nil {
		tb.Fatalf("%s answer: %v", coding, err)
	}
	out, err := io.ReadAll(r)
	if err != nil {
		tb.Fatalf("%s answer: %v", coding, err)
	}
	return out
}
