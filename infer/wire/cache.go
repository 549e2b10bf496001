package wire

import (
	"context"
	"crypto/sha256"
	"encoding/base64"
	"encoding/binary"
	"fmt"
	"hash"
	"slices"

	"github.com/cluster-serving/cluster-serving/infer"
)

// The response cache (Triton's response_cache): the outputs of a request
// are kept under a key made of everything that decides them, so that an
// equal request, whatever its id and wire format, is answered without
// running the model. A door looks the key up (NewCacheRequest, Answer)
// and answers a hit itself; a worker's Predictor stores what it ran
// (WithCache). wire alone decides the key and the stored form, so the
// two sides agree without sharing anything else; where the values live
// (mesh: a JetStream key-value bucket) is the Cache's business.
//
// Only the OIP codecs (MediaTypeOIP, MediaTypeOIPBinary,
// MediaTypeKServeGRPC) are cached: their answers are the model's typed
// tensors, which a door can encode alone. A JSON instances or Redis
// answer is post-processed with the worker's settings (postProcessing),
// which a door does not know.

// cacheKeyVersion starts every key: a change to what a key covers, or to
// the stored form (cacheValue), changes it, so that processes of two
// releases never read each other's entries.
const cacheKeyVersion = "cluster-serving response cache 1"

// Cache keeps values by key: the stored outputs of requests (see
// WithCache). Implementations must be safe for concurrent use, and must
// neither fail a request nor make it wait long: a store that cannot
// answer (an outage) is a miss.
type Cache interface {
	// Lookup returns the value stored under key; false when there is
	// none or the store cannot tell.
	Lookup(ctx context.Context, key string) ([]byte, bool)
	// Store keeps value under key, best effort: a value the store
	// cannot keep (too large, an outage) is dropped. It owns value once
	// called.
	Store(ctx context.Context, key string, value []byte)
}

// WithCache returns a copy of p that stores the outputs of every request
// it answers in an OIP format in c, under the request's cache key, once
// its answer is encoded; nil c: none. The store is best effort and never
// fails a request (Cache's rule). A door answers the next equal request
// from c (NewCacheRequest).
func (p *Predictor) WithCache(c Cache) *Predictor {
	q := *p
	q.cache = c
	return &q
}

// store keeps the outputs of req, decoded by codec and answered, in the
// Predictor's cache, when it has one and codec is cached. Outputs
// without a raw form are answered, not stored.
func (p *Predictor) store(ctx context.Context, codec Codec, req *Request, outs [][]infer.Tensor) {
	if p.cache == nil || !cacheable(codec) {
		return
	}
	value, err := cacheValue(req, outs, &p.spec)
	if err != nil {
		return
	}
	p.cache.Store(ctx, cacheKey(&p.spec, req), value)
}

// cacheable reports whether codec's answers are cached: the OIP ones.
func cacheable(codec Codec) bool {
	switch codec.(type) {
	case oipCodec, oipBinCodec, grpcCodec:
		return true
	}
	return false
}

// CacheRequest is a request body decoded at a door to look its answer
// up in a Cache: Key is its cache key; Answer encodes stored outputs as
// the answer to this very request (its id, its binary or raw outputs).
type CacheRequest struct {
	// Key is the request's cache key: base64url (no padding) of a SHA-256,
	// valid as a NATS key-value key.
	Key   string
	codec Codec
	req   *Request
	spec  Spec
}

// NewCacheRequest decodes body, of contentType (as Predictor.Predict
// takes it), for the model s describes, and computes its cache key. It
// returns ErrNotCacheable for a content type whose answers are not
// cached, and the codec's error (an *infer.InputError) for a body that
// does not decode: such a request goes to a worker, which answers it. s
// needs only Model and Info, as a door knows them: what the workers'
// settings change (AlreadyBatched, the split into rows) does not change
// the key.
func NewCacheRequest(ctx context.Context, contentType string, body []byte, s Spec) (*CacheRequest, error) {
	codec, err := codecFor(contentType)
	if err != nil {
		return nil, err
	}
	if !cacheable(codec) {
		return nil, ErrNotCacheable
	}
	if s.Model.Version == "" {
		s.Model.Version = "1"
	}
	// One whole record: the key is the same as for rows, and nothing is
	// split for nothing.
	s.Info.DynamicBatch = false
	req, err := codec.Decode(ctx, body, &s)
	if err != nil {
		return nil, err
	}
	return &CacheRequest{Key: cacheKey(&s, req), codec: codec, req: req, spec: s}, nil
}

// Answer encodes value, the outputs a Predictor stored under r.Key, as
// the answer to r in its format. A value it cannot read (another
// model's, cut short) is an error: the caller treats it as a miss.
func (r *CacheRequest) Answer(value []byte) ([]byte, error) {
	rec, err := decodeCacheValue(value, r.spec.Info)
	if err != nil {
		return nil, err
	}
	for j, o := range r.spec.Info.Outputs {
		if rec[j].DType == infer.Invalid && (r.req.Outputs == nil || slices.Contains(r.req.Outputs, o.Name)) {
			return nil, fmt.Errorf("cached value lacks output %s", o.Name)
		}
	}
	req := *r.req
	req.Whole = true // the stored outputs are the answer's, stacked
	return r.codec.Encode(&req, [][]infer.Tensor{rec}, &r.spec)
}

// cacheKey is req's cache key under s: SHA-256 of the model's name and
// version, every input's name, datatype, shape (batch dim included) and
// bytes, in model order, and the requested outputs (none named: all),
// each field length-prefixed so that no two requests write the same
// stream. The id and the binary or raw form of the outputs only change
// the answer's encoding and are left out, so that a repeat in another
// format hits. The codecs read no other output parameter (classification
// is not served); one that did would have to go in here. The shape and
// the datatype go in, unlike in Triton's key, so that two tensors of the
// same bytes differ.
func cacheKey(s *Spec, req *Request) string {
	k := keyHash{h: sha256.New()}
	k.str(cacheKeyVersion)
	k.str(s.Model.Name)
	k.str(s.Model.Version)
	k.int(int64(len(s.Info.Inputs)))
	for j, in := range s.Info.Inputs {
		k.str(in.Name)
		k.input(req, j, s.AlreadyBatched)
	}
	outputs := req.Outputs
	if outputs == nil {
		outputs = s.Info.OutputNames()
	}
	outputs = slices.Compact(slices.Sorted(slices.Values(outputs)))
	k.int(int64(len(outputs)))
	for _, o := range outputs {
		k.str(o)
	}
	return base64.RawURLEncoding.EncodeToString(k.h.Sum(nil))
}

// keyHash writes the fields of a cache key.
type keyHash struct {
	h       hash.Hash
	scratch []byte
}

func (k *keyHash) int(v int64) {
	var b [binary.MaxVarintLen64]byte
	k.h.Write(binary.AppendVarint(b[:0], v))
}

func (k *keyHash) str(s string) {
	k.int(int64(len(s)))
	k.h.Write([]byte(s))
}

// input writes input j of req: its datatype, the shape of the whole
// tensor the request carried and its data, the same whether the codec
// split it into rows (each without its batch dim unless alreadyBatched)
// or kept it whole.
func (k *keyHash) input(req *Request, j int, alreadyBatched bool) {
	if len(req.Records) == 0 || j >= len(req.Records[0]) {
		k.int(-1)
		return
	}
	first := req.Records[0][j]
	k.str(OIPDatatype(first.DType))
	rows := req.Records
	if req.Whole {
		rows = rows[:1]
		k.int(int64(len(first.Shape)))
		for _, d := range first.Shape {
			k.int(d)
		}
	} else {
		row := first.Shape
		if alreadyBatched && len(row) > 0 {
			row = row[1:]
		}
		k.int(int64(len(row) + 1))
		k.int(int64(len(rows)))
		for _, d := range row {
			k.int(d)
		}
	}
	for _, rec := range rows {
		if j < len(rec) {
			k.data(rec[j])
		}
	}
}

// data writes t's data in OIP raw form (little-endian, BYTES elements
// length-prefixed): straight from memory on a little-endian machine.
func (k *keyHash) data(t infer.Tensor) {
	if mem, _ := numBytes(t.Data); hostLE && len(mem) > 0 {
		k.h.Write(mem)
		return
	}
	k.scratch = AppendRaw(k.scratch[:0], t)
	k.h.Write(k.scratch)
}

// cacheValue is what a Predictor stores for req: the outputs its answer
// holds (oipOutputs: requested, stacked), each as its name, datatype,
// shape and OIP raw data. An output without raw form is an error.
func cacheValue(req *Request, outs [][]infer.Tensor, s *Spec) ([]byte, error) {
	sel, err := oipOutputs(req, outs, s)
	if err != nil {
		return nil, err
	}
	n := binary.MaxVarintLen64
	for _, o := range sel {
		if !hasRaw(o.Tensor.DType) {
			return nil, fmt.Errorf("output %s: %s has no raw form", o.Name, o.Tensor.DType)
		}
		n += len(o.Name) + 8 + (len(o.Tensor.Shape)+3)*binary.MaxVarintLen64 + rawLen(o.Tensor)
	}
	b := make([]byte, 0, n)
	b = binary.AppendUvarint(b, uint64(len(sel)))
	for _, o := range sel {
		b = appendField(b, []byte(o.Name))
		b = appendField(b, []byte(OIPDatatype(o.Tensor.DType)))
		b = binary.AppendUvarint(b, uint64(len(o.Tensor.Shape)))
		for _, d := range o.Tensor.Shape {
			b = binary.AppendVarint(b, d)
		}
		b = binary.AppendUvarint(b, uint64(rawLen(o.Tensor)))
		b = AppendRaw(b, o.Tensor)
	}
	return b, nil
}

func appendField(b, f []byte) []byte {
	return append(binary.AppendUvarint(b, uint64(len(f))), f...)
}

// maxCachedRank bounds the rank of a stored output, as a check of a
// value's sanity.
const maxCachedRank = 64

// decodeCacheValue reads a cacheValue as one record of info's outputs,
// in model order; an output it does not hold is a zero tensor.
func decodeCacheValue(b []byte, info infer.ModelInfo) ([]infer.Tensor, error) {
	r := valueReader{b: b}
	n := r.uvarint()
	if n > uint64(len(info.Outputs)) {
		return nil, fmt.Errorf("cached value holds %d outputs, the model has %d", n, len(info.Outputs))
	}
	rec := make([]infer.Tensor, len(info.Outputs))
	for range n {
		name, dt := string(r.field()), string(r.field())
		rank := r.uvarint()
		if rank > maxCachedRank {
			return nil, fmt.Errorf("cached output %s has rank %d", name, rank)
		}
		shape := make([]int64, rank)
		for i := range shape {
			shape[i] = r.varint()
		}
		raw := r.field()
		if r.bad {
			break
		}
		j := slices.IndexFunc(info.Outputs, func(o infer.IO) bool { return o.Name == name })
		d, ok := OIPDType(dt)
		if j < 0 || !ok {
			return nil, fmt.Errorf("cached output %s of datatype %s is not the model's", name, dt)
		}
		t, err := DecodeRaw(raw, d, shape, name)
		if err != nil {
			return nil, fmt.Errorf("cached output %s: %w", name, err)
		}
		rec[j] = t
	}
	if r.bad || len(r.b) > 0 {
		return nil, fmt.Errorf("cached value of %d bytes is malformed", len(b))
	}
	return rec, nil
}

// valueReader reads the fields of a cacheValue; bad once one runs past
// its end.
type valueReader struct {
	b   []byte
	bad bool
}

func (r *valueReader) uvarint() uint64 { return readVarint(r, binary.Uvarint) }

func (r *valueReader) varint() int64 { return readVarint(r, binary.Varint) }

// readVarint reads one value of r with decode (binary.Uvarint or
// binary.Varint); 0, and r bad, when none is left.
func readVarint[T uint64 | int64](r *valueReader, decode func([]byte) (T, int)) T {
	v, n := decode(r.b)
	if n <= 0 {
		r.bad, r.b = true, nil
		return 0
	}
	r.b = r.b[n:]
	return v
}

func (r *valueReader) field() []byte {
	n := r.uvarint()
	if n > uint64(len(r.b)) {
		r.bad, r.b = true, nil
		return nil
	}
	f := r.b[:n]
	r.b = r.b[n:]
	return f
}
