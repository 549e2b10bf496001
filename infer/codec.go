package infer

import (
	"fmt"
	"mime"
	"slices"
	"strings"
	"sync"
)

// Codec turns one wire format into records and the model's outputs back
// into that format's answer. Each format lives in its own file and
// registers itself with RegisterCodec from an init function. A Codec must
// be safe for concurrent use.
type Codec interface {
	// Decode parses body into records: one tensor per model input, in
	// model order, without the batch dim unless alreadyBatched. A body
	// that does not fit the model is an *InputError.
	Decode(body []byte, info ModelInfo, alreadyBatched bool) ([][]Tensor, error)
	// Encode renders the outputs of those records. post is the configured
	// post-processing (its zero value means none).
	Encode(outs [][]Tensor, info ModelInfo, post PostProcess) ([]byte, error)
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
		panic("infer: codec registered twice: " + mediaType)
	}
	codecs[mediaType] = c
}

// ContentTypes lists the media types Predict accepts.
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
		return nil, inputErr(-1, "", "unsupported content type %q: want one of %s", contentType, strings.Join(ContentTypes(), ", "))
	}
	return c, nil
}

// MediaTypeJSON is the {"instances":[...]} -> {"predictions":[...]} format
// of the original HTTP frontend, also spoken by the NATS door.
const MediaTypeJSON = "application/json"

// instancesCodec is the MediaTypeJSON codec.
type instancesCodec struct{}

func init() { RegisterCodec(MediaTypeJSON, instancesCodec{}) }

func (instancesCodec) Decode(body []byte, info ModelInfo, alreadyBatched bool) ([][]Tensor, error) {
	return decodeInstances(body, info.Inputs, alreadyBatched, info.Image)
}

func (instancesCodec) Encode(outs [][]Tensor, _ ModelInfo, post PostProcess) ([]byte, error) {
	values := make([]string, len(outs))
	for i, rec := range outs {
		v, ok, err := post.Apply(rec)
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
