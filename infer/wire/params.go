package wire

import (
	"encoding/json"
	"mime"
	"strconv"
	"time"

	"google.golang.org/protobuf/encoding/protowire"

	"github.com/cluster-serving/cluster-serving/infer"
)

// QueueParams are the request parameters Triton's scheduler reads
// (docs/protocol/extension_parameters.md): priority (1 the highest; 0:
// none) and timeout (microseconds in the queue; 0: none).
type QueueParams struct {
	Priority uint64
	Timeout  time.Duration
}

// QueueParamsOf reads the priority and timeout parameters of a request
// body of contentType without decoding its tensors: the top-level
// "parameters" of an OIP JSON body or of a binary body's JSON header, the
// parameters map of a KServe gRPC ModelInferRequest. A door calls it for
// a model whose queue uses them. A parameter of the wrong kind is an
// *infer.InputError (a 400); a body that cannot be read has none (the
// worker's decode says what is wrong with it).
func QueueParamsOf(contentType string, body []byte) (QueueParams, error) {
	mt, _, _ := mime.ParseMediaType(contentType)
	switch mt {
	case MediaTypeOIP:
		return jsonQueueParams(body)
	case MediaTypeOIPBinary:
		header, _, err := SplitOIPBinary(body)
		if err != nil {
			return QueueParams{}, nil
		}
		return jsonQueueParams(header)
	case MediaTypeKServeGRPC:
		return grpcQueueParams(body)
	}
	return QueueParams{}, nil
}

// jsonQueueParams scans an OIP request's top level for "parameters",
// skipping the other values unchecked.
func jsonQueueParams(body []byte) (QueueParams, error) {
	var q QueueParams
	var raw []byte
	s := &scanner{b: body}
	err := s.object(func(key []byte) error {
		start := s.i
		if err := s.skipFast(); err != nil {
			return err
		}
		if string(key) == "parameters" {
			raw = s.b[start:s.i]
		}
		return nil
	})
	if err != nil || raw == nil {
		return q, nil
	}
	var params struct {
		Priority json.RawMessage `json:"priority"`
		Timeout  json.RawMessage `json:"timeout"`
	}
	if json.Unmarshal(raw, &params) != nil {
		return q, nil
	}
	return q, q.set(params.Priority, params.Timeout)
}

func (q *QueueParams) set(priority, timeout json.RawMessage) error {
	var err error
	if priority != nil {
		if q.Priority, err = uintParam("priority", string(priority)); err != nil {
			return err
		}
	}
	if timeout != nil {
		us, err := uintParam("timeout", string(timeout))
		if err != nil {
			return err
		}
		q.Timeout = time.Duration(min(us, 1<<40)) * time.Microsecond
	}
	return nil
}

func uintParam(name, v string) (uint64, error) {
	n, err := strconv.ParseUint(v, 10, 64)
	if err != nil {
		return 0, infer.NewInputError(-1, "", "parameter %q must be an unsigned integer, not %s", name, v)
	}
	return n, nil
}

// grpcQueueParams walks a ModelInferRequest's fields for its parameters
// map (field 4), skipping the rest.
func grpcQueueParams(b []byte) (QueueParams, error) {
	var q QueueParams
	for len(b) > 0 {
		num, typ, n := protowire.ConsumeTag(b)
		if n < 0 {
			return q, nil
		}
		b = b[n:]
		if num == 4 && typ == protowire.BytesType {
			entry, n := protowire.ConsumeBytes(b)
			if n < 0 {
				return q, nil
			}
			if err := q.grpcEntry(entry); err != nil {
				return q, err
			}
			b = b[n:]
			continue
		}
		n = protowire.ConsumeFieldValue(num, typ, b)
		if n < 0 {
			return q, nil
		}
		b = b[n:]
	}
	return q, nil
}

// grpcEntry reads one parameters entry: key (1), InferParameter (2)
// whose int64_param (2) or uint64_param (5) is the value.
func (q *QueueParams) grpcEntry(entry []byte) error {
	key, val := "", []byte(nil)
	for len(entry) > 0 {
		num, typ, n := protowire.ConsumeTag(entry)
		if n < 0 {
			return nil
		}
		entry = entry[n:]
		n = protowire.ConsumeFieldValue(num, typ, entry)
		if n < 0 {
			return nil
		}
		switch {
		case num == 1 && typ == protowire.BytesType:
			k, _ := protowire.ConsumeBytes(entry[:n])
			key = string(k)
		case num == 2 && typ == protowire.BytesType:
			val, _ = protowire.ConsumeBytes(entry[:n])
		}
		entry = entry[n:]
	}
	if key != "priority" && key != "timeout" {
		return nil
	}
	v, ok := grpcIntParam(val)
	if !ok {
		return infer.NewInputError(-1, "", "parameter %q must be an int64_param or uint64_param", key)
	}
	n := json.RawMessage(strconv.FormatInt(v, 10))
	if key == "priority" {
		return q.set(n, nil)
	}
	return q.set(nil, n)
}

// grpcIntParam reads an InferParameter's int64_param or uint64_param.
func grpcIntParam(b []byte) (int64, bool) {
	for len(b) > 0 {
		num, typ, n := protowire.ConsumeTag(b)
		if n < 0 {
			return 0, false
		}
		b = b[n:]
		if (num == 2 || num == 5) && typ == protowire.VarintType {
			v, n := protowire.ConsumeVarint(b)
			return int64(v), n >= 0
		}
		if n = protowire.ConsumeFieldValue(num, typ, b); n < 0 {
			return 0, false
		}
		b = b[n:]
	}
	return 0, false
}
