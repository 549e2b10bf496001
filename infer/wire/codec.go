package wire

import (
	"context"

	"fmt"
	"mime"
	"slices"
	"strings"
	"sync"

	"github.com/cluster-serving/cluster-serving/infer"
)

// Codec turns one wire format into records and the model's outputs back
// into that format's answer. Each format lives in its own file and
// registers itself with RegisterCodec from an init function. A Codec must
// be safe for concurrent use.
type Codec interface {
	// Decode parses body into a Request: its records hold one tensor per
	// model input, in model order, without the batch dim unless
	// s.AlreadyBatched. A body that does not fit the model is an
	// *infer.InputError.
	Decode(ctx context.Context, body []byte, s *Spec) (*Request, error)
	// Encode renders the outputs of req's records, in order, as the
	// answer to req.
	Encode(req *Request, outs [][]infer.Tensor, s *Spec) ([]byte, error)
}

// Spec is what a Codec knows of the model it decodes for: a plain value
// that a Predictor fills once from its engine.
type Spec struct {
	// Model names the model in answers that carry its name (OIP).
	Model Model
	// Info describes the inputs and outputs; Info.Image is how image
	// inputs are pre-processed.
	Info infer.ModelInfo
	// AlreadyBatched means records keep their batch dim
	// (infer.Config.InputAlreadyBatched).
	AlreadyBatched bool
	// Post is the post-processing of JSON and Redis answers; its zero value
	// means none.
	Post infer.PostProcess
	// RecordKey decrypts the images of Redis records
	// (infer.Engine.RecordKey, recordEncrypted); nil means plain. Only the
	// Redis codecs use it, as only the Redis door carried the original's
	// encrypted records.
	RecordKey *infer.Key
	// MaxBatch is the model's max_batch_size (infer.Engine.MaxRequestBatch):
	// a request of more rows along dim 0 is an *infer.InputError, whether
	// the codec splits it into rows or not (see checkRows); 0: no bound.
	MaxBatch int
}

// Request is one decoded body: the records to run and what the body asked
// of its answer.
type Request struct {
	// Records go to infer.Engine.Infer as they are.
	Records [][]infer.Tensor
	// ID is the request id an OIP answer echoes; "" for none.
	ID string
	// Outputs names the outputs an OIP answer holds; nil means all.
	Outputs []string
	// Whole means Records is the request's tensors as they came, one
	// record: its outputs are the answer's as they are, not rows to stack.
	Whole bool
	// Raw names the outputs the answer carries as raw tensor bytes (the
	// OIP binary tensor data extension, gRPC raw_output_contents); nil
	// means none.
	Raw map[string]bool
}

var (
	codecsMu sync.RWMutex
	codecs   = map[string]Codec{}
)

// RegisterCodec makes c serve the media type mediaType (lower case, no
// parameters). It panics on a duplicate, which is a programming error.
func RegisterCodec(mediaType string, c Codec) {
	codecsMu.Lock()
	defer codecsMu.Unlock()
	if _, dup := codecs[mediaType]; dup {
		panic("wire: codec registered twice: " + mediaType)
	}
	codecs[mediaType] = c
}

// ContentTypes lists the media types of the registered codecs, which
// Predictor.Predict accepts.
func ContentTypes() []string {
	codecsMu.RLock()
	defer codecsMu.RUnlock()
	out := make([]string, 0, len(codecs))
	for k := range codecs {
		out = append(out, k)
	}
	slices.Sort(out)
	return out
}

// codecFor picks the codec of contentType; "" means application/json.
func codecFor(contentType string) (Codec, error) {
	if contentType == "" {
		contentType = MediaTypeJSON
	}
	mt, _, err := mime.ParseMediaType(contentType)
	codecsMu.RLock()
	c, ok := codecs[mt]
	codecsMu.RUnlock()
	if err != nil || !ok {
		return nil, infer.NewInputError(-1, "", "unsupported content type %q: want one of %s", contentType, strings.Join(ContentTypes(), ", "))
	}
	return c, nil
}

// instancesCodec is the MediaTypeJSON codec.
type instancesCodec struct{}

func init() { RegisterCodec(MediaTypeJSON, instancesCodec{}) }

func (instancesCodec) Decode(ctx context.Context, body []byte, s *Spec) (*Request, error) {
	recs, err := decodeInstances(ctx, body, s.Info.Inputs, s.AlreadyBatched, s.Info.Image)
	if err != nil {
		return nil, err
	}
	if err := checkRows(recs, s); err != nil {
		return nil, err
	}
	return &Request{Records: recs}, nil
}

// checkRows bounds a request decoded into records by s.MaxBatch: its
// rows are its records (one instance, one row), or with s.AlreadyBatched
// the sum of their dim 0 (a record without one counts 1). A JSON
// instances request is one batch, as an OIP request is: the engine would
// bound each record alone, and a request of 9 one-row records on a model
// of max_batch_size 8 would run.
func checkRows(recs [][]infer.Tensor, s *Spec) error {
	if s.MaxBatch <= 0 || len(s.Info.Inputs) == 0 {
		return nil
	}
	rows := int64(len(recs))
	if s.AlreadyBatched {
		rows = 0
		for _, rec := range recs {
			n := int64(1)
			if len(rec) > 0 && len(rec[0].Shape) > 0 {
				n = rec[0].Shape[0]
			}
			rows += n
		}
	}
	return infer.CheckRequestBatch(s.Info.Inputs[0].Name, rows, s.MaxBatch)
}

func (instancesCodec) Encode(_ *Request, outs [][]infer.Tensor, s *Spec) ([]byte, error) {
	values := make([]string, len(outs))
	for i, rec := range outs {
		v, ok, err := s.Post.Apply(rec)
		if err != nil {
			return nil, fmt.Errorf("record %d: post-processing: %w", i, err)
		}
		if !ok {
			v = RecordValue(rec)
		}
		values[i] = v
	}
	return EncodePredictions(values), nil
}
