package httpdoor_test

import (
	"bytes"
	"compress/flate"
	"compress/gzip"
	"compress/zlib"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"reflect"
	"runtime"
	"strconv"
	"strings"
	"testing"

	httpdoor "github.com/cluster-serving/cluster-serving/bridge/httpdoor"
	"github.com/cluster-serving/cluster-serving/infer"
	"github.com/cluster-serving/cluster-serving/infer/infertest"
	"github.com/cluster-serving/cluster-serving/infer/wire"
)

// postBinary posts header and tensors to url with the binary tensor data
// extension's header (headerLen < 0: none) and returns the answer.
func postBinary(tb testing.TB, url string, headerLen int, body []byte) (*http.Response, []byte) {
	tb.Helper()
	req, err := http.NewRequest("POST", url, bytes.NewReader(body))
	if err != nil {
		tb.Fatal(err)
	}
	req.Header.Set("Content-Type", "application/octet-stream")
	if headerLen >= 0 {
		req.Header.Set(wire.HeaderInferenceContentLength, strconv.Itoa(headerLen))
	}
	return do(tb, req)
}

// TestBinaryExtension: over the real mesh, a binary request answers what
// the JSON request answers; binary outputs come back raw with their size
// in the header, FP16 bit for bit.
func TestBinaryExtension(t *testing.T) {
	infertest.RequireLibrary(t)
	e := startDoor(t, httpdoor.Config{}, served{name: "two", file: "two_io"}, served{name: "f16", file: "identity_f16"})

	jsonBody := `{"id":"q","inputs":[{"name":"a","datatype":"FP32","shape":[2,3],"data":[1,2,3,4,5,6]},{"name":"b","datatype":"FP32","shape":[2,3],"data":[1,1,1,2,2,2]}]}`
	st, want := call(t, "POST", e.url+"/v2/models/two/infer", jsonBody)
	if st != 200 {
		t.Fatalf("JSON: got %d %s", st, want)
	}
	a := wire.AppendRaw(nil, infer.Tensor{DType: infer.Float32, Shape: []int64{2, 3}, Data: []float32{1, 2, 3, 4, 5, 6}})
	header := `{"id":"q","inputs":[{"name":"a","datatype":"FP32","shape":[2,3],"parameters":{"binary_data_size":24}},{"name":"b","datatype":"FP32","shape":[2,3],"data":[1,1,1,2,2,2]}]}`
	resp, got := postBinary(t, e.url+"/v2/models/two/infer", len(header), append([]byte(header), a...))
	if resp.StatusCode != 200 || !bytes.Equal(got, want) || resp.Header.Get("Content-Type") != wire.MediaTypeJSON {
		t.Errorf("binary inputs, JSON outputs: got %d %s %s, want 200 %s", resp.StatusCode, resp.Header.Get("Content-Type"), got, want)
	}

	// All outputs binary, asked for in a JSON-only body without the
	// header, as Triton's clients do.
	resp, got = postBinary(t, e.url+"/v2/models/two/infer", -1, []byte(strings.Replace(jsonBody, `"id":"q",`, `"id":"q","parameters":{"binary_data_output":true},`, 1)))
	hl, err := strconv.Atoi(resp.Header.Get(wire.HeaderInferenceContentLength))
	if resp.StatusCode != 200 || err != nil || resp.Header.Get("Content-Type") != "application/octet-stream" || hl > len(got) {
		t.Fatalf("binary outputs: got %d %v %s", resp.StatusCode, resp.Header, got)
	}
	var head struct {
		Outputs []struct {
			Name       string
			Shape      []int64
			Data       json.RawMessage
			Parameters map[string]int
		}
	}
	if err := json.Unmarshal(got[:hl], &head); err != nil || len(head.Outputs) != 2 {
		t.Fatalf("binary outputs header %s: %v", got[:hl], err)
	}
	var wantJSON struct{ Outputs []struct{ Data []float32 } }
	_ = json.Unmarshal(want, &wantJSON)
	tail := got[hl:]
	for i, o := range head.Outputs {
		n := o.Parameters["binary_data_size"]
		if o.Data != nil || n != 24 || len(tail) < n {
			t.Fatalf("output %s: got %s, want binary_data_size 24 and no data", o.Name, got[:hl])
		}
		tt, err := wire.DecodeRaw(tail[:n], infer.Float32, o.Shape, o.Name)
		if err != nil || !reflect.DeepEqual(tt.Data, wantJSON.Outputs[i].Data) {
			t.Errorf("output %s: got %v (%v), want %v as JSON answered", o.Name, tt.Data, err, wantJSON.Outputs[i].Data)
		}
		tail = tail[n:]
	}

	// FP16 both ways raw: bit for bit, which JSON's decimals cannot be
	// for every value.
	in := []infer.F16{0x3c00, 0xc000, 0x7bff, 0x0001, 0x03ff, 0x8000, 0x3555, 0x7c00}
	raw := wire.AppendRaw(nil, infer.Tensor{DType: infer.Float16, Shape: []int64{2, 4}, Data: in})
	header = `{"inputs":[{"name":"x","datatype":"FP16","shape":[2,4],"parameters":{"binary_data_size":16}}],"outputs":[{"name":"y","parameters":{"binary_data":true}}]}`
	resp, got = postBinary(t, e.url+"/v2/models/f16/infer", len(header), append([]byte(header), raw...))
	hl, _ = strconv.Atoi(resp.Header.Get(wire.HeaderInferenceContentLength))
	if resp.StatusCode != 200 || hl <= 0 || !bytes.Equal(got[hl:], raw) {
		t.Errorf("FP16: got %d %q, want the 16 input bytes back after the header", resp.StatusCode, got)
	}
}

func TestBinaryExtensionErrors(t *testing.T) {
	infertest.RequireLibrary(t)
	e := startDoor(t, httpdoor.Config{}, served{name: "add", file: "add_f32"})
	header := `{"inputs":[{"name":"x","datatype":"FP32","shape":[1,4],"parameters":{"binary_data_size":16}}]}`
	raw := make([]byte, 16)
	tests := []struct {
		name      string
		headerLen string
		body      []byte
		want      string
	}{
		{"header length past body", "1000", append([]byte(header), raw...), "Inference-Header-Content-Length: \\\"1000\\\" is not a length within the body's 110 bytes"},
		{"header length not a number", "x", append([]byte(header), raw...), "is not a length"},
		{"header length cuts the JSON", strconv.Itoa(len(header) - 1), append([]byte(header), raw...), "malformed OIP request header"},
		{"short tensor", strconv.Itoa(len(header)), append([]byte(header), raw[:15]...), "binary_data_size 16 runs past the body: only 15 bytes"},
		{"long tensor", strconv.Itoa(len(header)), append([]byte(header), make([]byte, 17)...), "17 bytes of binary data after the JSON header"},
		{"size not shape", strconv.Itoa(len(header)), append([]byte(strings.Replace(header, "[1,4]", "[1,3]", 1)), raw...), "does not match model"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			req, _ := http.NewRequest("POST", e.url+"/v2/models/add/infer", bytes.NewReader(tt.body))
			req.Header.Set(wire.HeaderInferenceContentLength, tt.headerLen)
			resp, err := httpClient.Do(req)
			if err != nil {
				t.Fatal(err)
			}
			b, _ := io.ReadAll(resp.Body)
			resp.Body.Close()
			if resp.StatusCode != 400 || !strings.Contains(string(b), tt.want) {
				t.Errorf("got %d %s, want 400 with %q", resp.StatusCode, b, tt.want)
			}
		})
	}
}

// TestBinaryExtensionStrings: over the real mesh, BYTES travel framed
// (4-byte little-endian length, then the bytes, per element) both ways:
// the answer's binary output is what the session answers, and JSON
// outputs match the JSON request's.
func TestBinaryExtensionStrings(t *testing.T) {
	infertest.RequireLibrary(t)
	e := startDoor(t, httpdoor.Config{}, served{name: "id", file: "identity_str"}, served{name: "tof", file: "cast_str_f32"})
	in := infer.Tensor{DType: infer.String, Shape: []int64{2, 2}, Data: []string{"a", "", "é", strings.Repeat("z", 500)}}
	raw := wire.AppendRaw(nil, in)
	want, err := infertest.NewSession(t, modelPath("identity_str")).Run([]infer.Tensor{in})
	if err != nil {
		t.Fatal(err)
	}

	header := fmt.Sprintf(`{"inputs":[{"name":"x","datatype":"BYTES","shape":[2,2],"parameters":{"binary_data_size":%d}}],"outputs":[{"name":"y","parameters":{"binary_data":true}}]}`, len(raw))
	resp, got := postBinary(t, e.url+"/v2/models/id/infer", len(header), append([]byte(header), raw...))
	hl, err := strconv.Atoi(resp.Header.Get(wire.HeaderInferenceContentLength))
	if resp.StatusCode != 200 || err != nil || hl > len(got) {
		t.Fatalf("got %d %v %q", resp.StatusCode, resp.Header, got)
	}
	var head struct {
		Outputs []struct {
			Name, Datatype string
			Shape          []int64
			Data           json.RawMessage
			Parameters     map[string]int
		}
	}
	if err := json.Unmarshal(got[:hl], &head); err != nil || len(head.Outputs) != 1 {
		t.Fatalf("header %s: %v", got[:hl], err)
	}
	o := head.Outputs[0]
	if o.Datatype != "BYTES" || o.Data != nil || o.Parameters["binary_data_size"] != len(got)-hl {
		t.Fatalf("got header %s with %d bytes after it, want y BYTES with binary_data_size of them all", got[:hl], len(got)-hl)
	}
	y, err := wire.DecodeRaw(got[hl:], infer.String, o.Shape, o.Name)
	if err != nil || !reflect.DeepEqual(y.Shape, want[0].Shape) || !reflect.DeepEqual(y.Data, want[0].Data) {
		t.Errorf("got %v %q (%v), want %v %q", y.Shape, y.Data, err, want[0].Shape, want[0].Data)
	}

	// Binary BYTES in, JSON FP32 out: the same answer as all-JSON.
	jsonBody := `{"id":"q","inputs":[{"name":"x","datatype":"BYTES","shape":[1,3],"data":["1.5","-2","1e3"]}]}`
	st, wantJSON := call(t, "POST", e.url+"/v2/models/tof/infer", jsonBody)
	if st != 200 {
		t.Fatalf("JSON: got %d %s", st, wantJSON)
	}
	s := wire.AppendRaw(nil, infer.Tensor{DType: infer.String, Shape: []int64{1, 3}, Data: []string{"1.5", "-2", "1e3"}})
	header = fmt.Sprintf(`{"id":"q","inputs":[{"name":"x","datatype":"BYTES","shape":[1,3],"parameters":{"binary_data_size":%d}}]}`, len(s))
	resp, got = postBinary(t, e.url+"/v2/models/tof/infer", len(header), append([]byte(header), s...))
	if resp.StatusCode != 200 || string(got) != string(wantJSON) {
		t.Errorf("binary BYTES in: got %d %s, want 200 %s", resp.StatusCode, got, wantJSON)
	}
}

// TestBinaryExtensionStringErrors: framing that does not hold the shape's
// elements, and a NUL byte, are 400 naming the input.
func TestBinaryExtensionStringErrors(t *testing.T) {
	infertest.RequireLibrary(t)
	e := startDoor(t, httpdoor.Config{}, served{name: "id", file: "identity_str"})
	post := func(raw []byte) (int, string) {
		header := fmt.Sprintf(`{"inputs":[{"name":"x","datatype":"BYTES","shape":[1,2],"parameters":{"binary_data_size":%d}}]}`, len(raw))
		resp, b := postBinary(t, e.url+"/v2/models/id/infer", len(header), append([]byte(header), raw...))
		return resp.StatusCode, string(b)
	}
	tests := []struct {
		name string
		raw  []byte
		want string
	}{
		{"length past the end", []byte{1, 0, 0, 0, 'a', 9, 0, 0, 0, 'b'}, `input \"x\": raw BYTES element 1 of 2 has length 9, past the end of the data`},
		{"trailing bytes", []byte{1, 0, 0, 0, 'a', 1, 0, 0, 0, 'b', 0}, `input \"x\": raw data has 1 bytes after the 2 BYTES elements`},
		{"too few elements", []byte{4, 0, 0, 0, 'a', 'b', 'c', 'd'}, `input \"x\": raw data holds 1 BYTES elements, shape [1 2] needs 2`},
		{"NUL", []byte{2, 0, 0, 0, 'a', 0, 1, 0, 0, 0, 'b'}, `input \"x\": string element 0 holds a NUL byte`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if st, b := post(tt.raw); st != 400 || !strings.Contains(b, tt.want) {
				t.Errorf("got %d %s, want 400 with %q", st, b, tt.want)
			}
		})
	}
}

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
