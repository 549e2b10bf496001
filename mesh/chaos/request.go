package chaos

import (
	"encoding/json"
	"fmt"
	"math"
	"slices"
	"time"

	"github.com/cluster-serving/cluster-serving/infer"
	"github.com/cluster-serving/cluster-serving/infer/wire"
)

// Door is one of the four ways in.
type Door int

// The doors, in the order of the table. DoorRESP is the RESP door: the
// Redis door's commands with no redis-server behind them.
const (
	DoorNATS Door = iota
	DoorHTTP
	DoorRedis
	DoorRESP
	numDoors
)

func (d Door) String() string { return [...]string{"nats", "http", "redis", "resp"}[d] }

// Request is what the checker knows of one request. A good request asks
// the model (Calc) for an input derived from its id, so every answer is
// checked against the id it came back under; a garbage request expects
// its door's bad-input answer (400, or NaN for Redis).
type Request struct {
	Door     Door
	ID       int64
	Garbage  bool
	Sent     time.Time // first attempt
	Answered time.Time // first right answer; zero if none
	// Status is the final outcome: 200 answered, 0 none (lost unless
	// Unsure), another code an error answer, -1 a wrong answer.
	Status  int
	Err     string
	Answers int // right answers seen; more than 1+Resent is a visible duplicate
	Resent  int // sends of the same request after an attempt got no answer
	Busy    int // 503 answers, each retried
	// Unsure: the Redis XADD failed in a way that leaves unknown whether
	// Redis took it (the server died mid-command); never resent.
	Unsure bool
}

// Calc is what the model the load asks computes, against which every
// answer is checked: good request id sends In(id), one instance under the
// input name Input, and the right answer is Out(In(id)), one output of
// as many floats. In is exact in float32 and distinct per id modulo
// 4096, and Out exact too, so that answers compare to 1e-6 and Redis
// results byte for byte. The zero Calc is AddOne.
type Calc struct {
	Input string
	In    func(id int64) []float32
	Out   func(in []float32) []float32
}

// AddOne is add_f32's: y = 2x+1 of four floats under "x".
var AddOne = Calc{Input: "x", In: x, Out: func(in []float32) []float32 {
	v := slices.Clone(in)
	for i := range v {
		v[i] = 2*v[i] + 1
	}
	return v
}}

// x is add_f32's input of a good request.
func x(id int64) []float32 {
	a := float32(id % 4096)
	return []float32{a, -a, float32(id%8) / 4, 0.5}
}

// Body is the JSON instances body of good request id, which every door
// takes.
func (m Calc) Body(id int64) []byte {
	b := fmt.Appendf(nil, `{"instances":[{%q:[`, m.Input)
	for i, v := range m.In(id) {
		if i > 0 {
			b = append(b, ',')
		}
		b = fmt.Appendf(b, "%g", v)
	}
	return append(b, "]}]}"...)
}

// GoodBody is AddOne.Body, for the power cuts of `start` (lazyfs), which
// serve add_f32.
func GoodBody(id int64) []byte { return AddOne.Body(id) }

// CheckPredictions is AddOne.Check, for the power cuts of `start`.
func CheckPredictions(id int64, body []byte) error { return AddOne.Check(id, body) }

// WantRedis is AddOne.WantRedis, for the power cuts of `start`.
func WantRedis(id int64) string { return AddOne.WantRedis(id) }

// garbageBody is a malformed body, different each time.
func garbageBody(id int64) []byte { return fmt.Appendf(nil, `{"instances":[{"x":[%d,, garbage`, id) }

// want is the model's answer to good request id.
func (m Calc) want(id int64) []float32 { return m.Out(m.In(id)) }

// Check checks the body of a NATS or HTTP answer to good request id: one
// prediction, the model's answer to Body(id).
func (m Calc) Check(id int64, body []byte) error {
	var p struct {
		Predictions []string `json:"predictions"`
	}
	if err := json.Unmarshal(body, &p); err != nil || len(p.Predictions) != 1 {
		return fmt.Errorf("answer %.200q is not one prediction", body)
	}
	var v struct {
		Value string `json:"value"`
	}
	var t struct {
		Data  []float64 `json:"data"`
		Shape []int     `json:"shape"`
	}
	if json.Unmarshal([]byte(p.Predictions[0]), &v) != nil || json.Unmarshal([]byte(v.Value), &t) != nil {
		return fmt.Errorf("prediction %.200q is not {value: {data, shape}}", p.Predictions[0])
	}
	w := m.want(id)
	if len(t.Data) != len(w) {
		return fmt.Errorf("id %d: got %v, want %v", id, t.Data, w)
	}
	for i := range w {
		if math.Abs(t.Data[i]-float64(w[i])) > 1e-6 {
			return fmt.Errorf("id %d: got %v, want %v", id, t.Data, w)
		}
	}
	return nil
}

// WantRedis is the Redis result value of good request id: the Arrow
// encoding the Redis door contract fixes (SPEC §2), made by infer/wire.
func (m Calc) WantRedis(id int64) string {
	w := m.want(id)
	v, err := wire.EncodeRedisArrow([]infer.Tensor{{DType: infer.Float32, Shape: []int64{int64(len(w))}, Data: w}})
	if err != nil {
		panic(err) // a float32 vector always encodes
	}
	return string(v)
}
