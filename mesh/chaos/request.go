package chaos

import (
	"encoding/json"
	"fmt"
	"math"
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
// for y = 2x+1 of an x derived from its id, so every answer is checked
// against the id it came back under; a garbage request expects its door's
// bad-input answer (400, or NaN for Redis).
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

// x is the input of a good request: exact in float32 and distinct per id
// modulo 4096.
func x(id int64) []float32 {
	a := float32(id % 4096)
	return []float32{a, -a, float32(id%8) / 4, 0.5}
}

// GoodBody is the JSON instances body of good request id, which every
// door takes.
func GoodBody(id int64) []byte {
	v := x(id)
	return fmt.Appendf(nil, `{"instances":[{"x":[%g,%g,%g,%g]}]}`, v[0], v[1], v[2], v[3])
}

// garbageBody is a malformed body, different each time.
func garbageBody(id int64) []byte { return fmt.Appendf(nil, `{"instances":[{"x":[%d,, garbage`, id) }

// want is the model's answer to a good request.
func want(id int64) []float32 {
	v := x(id)
	for i := range v {
		v[i] = 2*v[i] + 1
	}
	return v
}

// CheckPredictions checks the body of a NATS or HTTP answer to good
// request id: one prediction, y = 2x+1 of GoodBody(id)'s x.
func CheckPredictions(id int64, body []byte) error {
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
	w := want(id)
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

// WantRedis is the Redis result value of a good request: the Arrow
// encoding the Redis door contract fixes (SPEC §2), made by infer/wire.
func WantRedis(id int64) string {
	v, err := wire.EncodeRedisArrow([]infer.Tensor{{DType: infer.Float32, Shape: []int64{4}, Data: want(id)}})
	if err != nil {
		panic(err) // a 4-float tensor always encodes
	}
	return string(v)
}
