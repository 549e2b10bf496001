package grpcdoor

import (
	"compress/zlib"
	"io"
	"sync"

	"google.golang.org/grpc/encoding"
	// gzip is registered explicitly: the door must not depend on another
	// package (the OTLP exporter) happening to link it.
	_ "google.golang.org/grpc/encoding/gzip"
)

// The message compressions the door reads and answers with, grpc-encoding
// gzip and deflate: tritonclient's compression_algorithm offers both.
// grpc-go ships only gzip; deflate is zlib's format (RFC 1950), as gRPC
// core writes it. grpc-go bounds a decompressed message by MaxRecvBytes
// as it reads, so a compression bomb is a ResourceExhausted.
func init() { encoding.RegisterCompressor(deflate{}) }

// deflate is the "deflate" encoding.Compressor.
type deflate struct{}

var zlibWriters = sync.Pool{New: func() any { return zlib.NewWriter(io.Discard) }}

func (deflate) Name() string { return "deflate" }

func (deflate) Compress(w io.Writer) (io.WriteCloser, error) {
	z := zlibWriters.Get().(*zlib.Writer)
	z.Reset(w)
	return pooledWriter{z}, nil
}

func (deflate) Decompress(r io.Reader) (io.Reader, error) { return zlib.NewReader(r) }

// pooledWriter returns its zlib writer to the pool once closed.
type pooledWriter struct{ *zlib.Writer }

func (p pooledWriter) Close() error {
	err := p.Writer.Close()
	zlibWriters.Put(p.Writer)
	return err
}
