package wire

import (
	"context"

	"fmt"

	"github.com/cluster-serving/cluster-serving/infer"
)

func init() {
	RegisterCodec(MediaTypeRedisArrow, redisCodec{json: false})
	RegisterCodec(MediaTypeRedisJSON, redisCodec{json: true})
}

// redisCodec decodes one Redis entry into exactly one record, and encodes
// that record's outputs as the result value: the topN/pickTopN string when
// post-processing is configured, else EncodeRedisArrow's base64 Arrow. A
// Redis entry is one record even with alreadyBatched (its tensors then
// carry their own batch dim), so Encode takes exactly one record. With
// Spec.RecordKey its images are decrypted, as the original's
// recordEncrypted did; tensors never are.
type redisCodec struct{ json bool }

func (c redisCodec) Decode(ctx context.Context, body []byte, s *Spec) (*Request, error) {
	info := s.Info
	info.Image.Key = s.RecordKey // recordEncrypted: images decrypt after base64
	if !c.json {
		rec, err := decodeRedisArrow(ctx, body, info, s.AlreadyBatched)
		if err != nil {
			return nil, err
		}
		recs := [][]infer.Tensor{rec}
		if err := checkRows(recs, s); err != nil {
			return nil, err
		}
		return &Request{Records: recs}, nil
	}
	recs, err := decodeInstances(ctx, body, info.Inputs, s.AlreadyBatched, info.Image)
	if err != nil {
		return nil, err
	}
	if len(recs) != 1 {
		return nil, infer.NewInputError(-1, "", "got %d instances, a Redis entry holds one", len(recs))
	}
	if err := checkRows(recs, s); err != nil {
		return nil, err
	}
	return &Request{Records: recs}, nil
}

func (redisCodec) Encode(_ *Request, outs [][]infer.Tensor, s *Spec) ([]byte, error) {
	if len(outs) != 1 {
		return nil, fmt.Errorf("redis result: got %d records, want 1", len(outs))
	}
	v, ok, err := s.Post.Apply(outs[0])
	if err != nil {
		return nil, fmt.Errorf("post-processing: %w", err)
	}
	if ok {
		return []byte(v), nil
	}
	return EncodeRedisArrow(outs[0])
}
