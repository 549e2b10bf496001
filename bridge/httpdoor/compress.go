package httpdoor

import (
	"bufio"
	"compress/flate"
	"compress/gzip"
	"compress/zlib"
	"fmt"
	"io"
	"net/http"
	"strconv"
	"strings"
	"sync"

	"github.com/cluster-serving/cluster-serving/infer/status"
)

// Content codings (RFC 9110 §8.4) of request and answer bodies, as
// Triton's HTTP clients send and ask for them
// (request_compression_algorithm, response_compression_algorithm).
const (
	codingGzip    = "gzip"
	codingDeflate = "deflate" // zlib-wrapped, as Triton's clients and browsers mean it
	// minCompressBytes: an answer shorter than this goes uncompressed,
	// where the coding's own header and trailer would outweigh the gain.
	minCompressBytes = 512
)

// decode replaces r's body, which bounded has capped on the wire, with
// its decoding per Content-Encoding: gzip, or deflate (zlib-wrapped as
// Triton's clients send it, raw deflate as some others do), capped at
// limit decoded bytes (reading limit+1 of them fails with
// *http.MaxBytesError, so that a bomb never decodes further). Decoding
// starts at the first read, so that a route that reads no body decodes
// none; a corrupt stream fails that read. It returns the 415 *status.Error
// for a coding the door cannot decode.
func decode(w http.ResponseWriter, r *http.Request, limit int64) error {
	coding := strings.ToLower(strings.TrimSpace(strings.Join(r.Header.Values("Content-Encoding"), ",")))
	switch coding {
	case "", "identity":
		return nil
	case codingGzip, "x-gzip", codingDeflate:
	default:
		return status.Errorf(http.StatusUnsupportedMediaType,
			"Content-Encoding %q is not supported: send the body as one of gzip, deflate (zlib or raw) or identity", coding)
	}
	r.Body = http.MaxBytesReader(w, &decoder{coding: coding, src: r.Body}, limit)
	r.Header.Del("Content-Encoding")
	r.ContentLength = -1
	return nil
}

// decoder decodes src per coding from its first Read on. Its errors name
// the coding and wrap the cause (src's *http.MaxBytesError included).
type decoder struct {
	coding string
	src    io.ReadCloser
	dec    io.Reader // nil until the first Read
	err    error     // sticky: the decoder could not start
}

func (d *decoder) Read(p []byte) (int, error) {
	if d.dec == nil && d.err == nil {
		d.dec, d.err = newDecoder(d.coding, d.src)
	}
	if d.err != nil {
		return 0, d.wrap(d.err)
	}
	n, err := d.dec.Read(p)
	return n, d.wrap(err)
}

// wrap names the coding in err; io.EOF (an empty body included) stays as
// it is.
func (d *decoder) wrap(err error) error {
	if err == nil || err == io.EOF {
		return err
	}
	return fmt.Errorf("Content-Encoding %s: %w", d.coding, err)
}

func (d *decoder) Close() error { return d.src.Close() }

// newDecoder starts decoding src: deflate is zlib when its first two
// bytes are a zlib header (RFC 1950 §2.2), else raw deflate, whose
// first byte never passes that check as encoders write it. An empty
// body is io.EOF.
func newDecoder(coding string, src io.Reader) (io.Reader, error) {
	if coding != codingDeflate {
		return gzip.NewReader(src)
	}
	br := bufio.NewReader(src)
	h, err := br.Peek(2)
	switch {
	case len(h) == 0 && err == io.EOF:
		return nil, io.EOF
	case len(h) == 2 && h[0]&0x0f == 8 && h[0]>>4 <= 7 && (uint16(h[0])<<8|uint16(h[1]))%31 == 0:
		return zlib.NewReader(br)
	}
	return flate.NewReader(br), nil
}

// compressing wraps an inference route: when the request's
// Accept-Encoding takes gzip or deflate (q > 0), a 200 answer of at
// least minCompressBytes goes out in that coding (gzip on a tie), its
// Content-Length dropped and Inference-Header-Content-Length, if any,
// still counting the uncompressed bytes as Triton's clients read it.
// Error answers and short ones go as they are. Every answer says Vary:
// Accept-Encoding.
func compressing(next http.HandlerFunc) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		w.Header().Add("Vary", "Accept-Encoding")
		coding := acceptedCoding(r.Header.Values("Accept-Encoding"))
		if coding == "" {
			next(w, r)
			return
		}
		cw := &compressWriter{ResponseWriter: w, coding: coding}
		defer cw.close()
		next(cw, r)
	}
}

// acceptedCoding picks the answer's coding from Accept-Encoding values:
// gzip or deflate, whichever has the higher q, gzip on a tie; "*" stands
// for either when it is not named; "" when neither is acceptable (not
// asked for, or q=0). A q that does not parse counts as 0.
func acceptedCoding(values []string) string {
	q := map[string]float64{}
	for _, v := range values {
		for _, part := range strings.Split(v, ",") {
			name, params, _ := strings.Cut(part, ";")
			name = strings.ToLower(strings.TrimSpace(name))
			if name == "x-gzip" {
				name = codingGzip
			}
			q[name] = qValue(params)
		}
	}
	best, bestQ := "", 0.0
	for _, c := range []string{codingGzip, codingDeflate} {
		w, ok := q[c]
		if !ok {
			w = q["*"]
		}
		if w > bestQ {
			best, bestQ = c, w
		}
	}
	return best
}

// qValue is the weight in an Accept-Encoding element's parameters
// ("q=0.5"): 1 when absent, 0 when it does not parse.
func qValue(params string) float64 {
	for _, p := range strings.Split(params, ";") {
		k, v, ok := strings.Cut(strings.TrimSpace(p), "=")
		if !ok || !strings.EqualFold(strings.TrimSpace(k), "q") {
			continue
		}
		f, err := strconv.ParseFloat(strings.TrimSpace(v), 64)
		if err != nil || f < 0 {
			return 0
		}
		return f
	}
	return 1
}

// encoder is a pooled gzip or zlib writer.
type encoder interface {
	io.WriteCloser
	Reset(io.Writer)
}

// encoders pool each coding's writers: a deflate writer holds some
// hundreds of KiB, too many to allocate for each answer. BestSpeed: an
// answer's latency matters more than its last bytes.
var encoders = map[string]*sync.Pool{
	codingGzip: {New: func() any {
		zw, _ := gzip.NewWriterLevel(nil, gzip.BestSpeed)
		return zw
	}},
	codingDeflate: {New: func() any {
		zw, _ := zlib.NewWriterLevel(nil, zlib.BestSpeed)
		return zw
	}},
}

// compressWriter compresses the answer when WriteHeader finds it worth it
// (see compressing). It is used by one handler goroutine.
type compressWriter struct {
	http.ResponseWriter
	coding string
	enc    encoder // nil: the answer goes as it is
	wrote  bool
}

func (c *compressWriter) WriteHeader(st int) {
	if c.wrote {
		c.ResponseWriter.WriteHeader(st) // superfluous: net/http logs it
		return
	}
	c.wrote = true
	h := c.Header()
	n, err := strconv.Atoi(h.Get("Content-Length"))
	if st == http.StatusOK && h.Get("Content-Encoding") == "" && (err != nil || n >= minCompressBytes) {
		h.Del("Content-Length")
		h.Set("Content-Encoding", c.coding)
		c.enc = encoders[c.coding].Get().(encoder)
		c.enc.Reset(c.ResponseWriter)
	}
	c.ResponseWriter.WriteHeader(st)
}

func (c *compressWriter) Write(p []byte) (int, error) {
	if !c.wrote {
		c.WriteHeader(http.StatusOK)
	}
	if c.enc == nil {
		return c.ResponseWriter.Write(p)
	}
	return c.enc.Write(p)
}

// Unwrap lets http.ResponseController reach the connection's writer.
func (c *compressWriter) Unwrap() http.ResponseWriter { return c.ResponseWriter }

// close ends the compressed stream and pools its writer. A write error
// here means the client went away: there is no one left to tell.
func (c *compressWriter) close() {
	if c.enc == nil {
		return
	}
	_ = c.enc.Close()
	c.enc.Reset(io.Discard)
	encoders[c.coding].Put(c.enc)
	c.enc = nil
}
