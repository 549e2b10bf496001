package infer_test

import (
	"context"
	"errors"
	"fmt"
	"reflect"
	"strings"
	"sync"
	"testing"

	"github.com/cluster-serving/cluster-serving/infer"
	"github.com/cluster-serving/cluster-serving/infer/infertest"
)

func newEngine(t testing.TB, cfg infer.Config) *infer.Engine { return infertest.NewEngine(t, cfg) }

// unbatch splits a [2,4] tensor into its two rows.
func unbatch(t infer.Tensor) []infer.Tensor {
	rows := make([]infer.Tensor, t.Shape[0])
	n := t.Len() / len(rows)
	for i := range rows {
		r := infer.NewTensor(t.DType, t.Shape[1:])
		rv, tv := reflect.ValueOf(r.Data), reflect.ValueOf(t.Data)
		reflect.Copy(rv, tv.Slice(i*n, (i+1)*n))
		rows[i] = r
	}
	return rows
}

func TestEngineDTypesMatchSession(t *testing.T) {
	for _, tc := range dtypeCases() {
		t.Run(tc.model, func(t *testing.T) {
			e := newEngine(t, infer.Config{ModelPath: model(tc.model), Parallelism: 2})
			direct, err := newSession(t, tc.model).Run([]infer.Tensor{tc.in})
			if err != nil {
				t.Fatal(err)
			}
			ins := unbatch(tc.in)
			outs, err := e.Infer(context.Background(), [][]infer.Tensor{{ins[0]}, {ins[1]}})
			if err != nil {
				t.Fatal(err)
			}
			for i, want := range unbatch(direct[0]) {
				if !reflect.DeepEqual(outs[i][0], want) {
					t.Errorf("record %d: got %+v, want %+v", i, outs[i][0], want)
				}
			}
		})
	}
}

func TestEngineShapes(t *testing.T) {
	f := func(shape []int64, v ...float32) infer.Tensor { return f32(shape, v...) }
	tests := []struct {
		name    string
		cfg     infer.Config
		records [][]infer.Tensor
		want    [][]infer.Tensor
	}{
		{
			name:    "fixed batch runs one at a time",
			cfg:     infer.Config{ModelPath: model("fixed_f32")},
			records: [][]infer.Tensor{{f([]int64{4}, 1, 2, 3, 4)}, {f([]int64{4}, 0, 0, 0, 1)}},
			want:    [][]infer.Tensor{{f([]int64{4}, 3, 5, 7, 9)}, {f([]int64{4}, 1, 1, 1, 3)}},
		},
		{
			name:    "two inputs two outputs",
			cfg:     infer.Config{ModelPath: model("two_io")},
			records: [][]infer.Tensor{{f([]int64{3}, 1, 2, 3), f([]int64{3}, 4, 5, 6)}, {f([]int64{3}, 0, 1, 0), f([]int64{3}, 2, 2, 2)}},
			want: [][]infer.Tensor{
				{f([]int64{3}, 5, 7, 9), f([]int64{3}, 4, 10, 18)},
				{f([]int64{3}, 2, 3, 2), f([]int64{3}, 0, 2, 0)},
			},
		},
		{
			name: "dynamic non-batch dim, mixed lengths",
			cfg:  infer.Config{ModelPath: model("matmul_dyn")},
			// w = [[0,.125],[.25,.375],[.5,.625],[.75,.875]]
			records: [][]infer.Tensor{{f([]int64{1, 4}, 1, 0, 0, 0)}, {f([]int64{2, 4}, 0, 1, 0, 0, 0, 0, 0, 1)}},
			want:    [][]infer.Tensor{{f([]int64{1, 2}, 0, 0.125)}, {f([]int64{2, 2}, 0.25, 0.375, 0.75, 0.875)}},
		},
		{
			name:    "already batched",
			cfg:     infer.Config{ModelPath: model("add_f32"), InputAlreadyBatched: true},
			records: [][]infer.Tensor{{f([]int64{2, 4}, 1, 1, 1, 1, 2, 2, 2, 2)}, {f([]int64{1, 4}, 0, 0, 0, 0)}},
			want:    [][]infer.Tensor{{f([]int64{2, 4}, 3, 3, 3, 3, 5, 5, 5, 5)}, {f([]int64{1, 4}, 1, 1, 1, 1)}},
		},
		{
			name:    "output not batched: records run alone",
			cfg:     infer.Config{ModelPath: model("sum_batch"), InputAlreadyBatched: true},
			records: [][]infer.Tensor{{f([]int64{2, 4}, 1, 1, 1, 1, 2, 2, 2, 2)}, {f([]int64{1, 4}, 5, 0, 0, 0)}},
			want:    [][]infer.Tensor{{f([]int64{1, 4}, 3, 3, 3, 3)}, {f([]int64{1, 4}, 5, 0, 0, 0)}},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			e := newEngine(t, tt.cfg)
			got, err := e.Infer(context.Background(), tt.records)
			if err != nil {
				t.Fatal(err)
			}
			if !reflect.DeepEqual(got, tt.want) {
				t.Errorf("Infer:\ngot  %+v\nwant %+v", got, tt.want)
			}
		})
	}
}

func TestEngineInferErrors(t *testing.T) {
	fixed := newEngine(t, infer.Config{ModelPath: model("fixed_f32"), InputAlreadyBatched: true})
	add := newEngine(t, infer.Config{ModelPath: model("add_f32")})
	capped := newEngine(t, infer.Config{ModelPath: model("add_f32"), MaxRequestBatch: 2, InputAlreadyBatched: true})
	tests := []struct {
		name string
		e    *infer.Engine
		recs [][]infer.Tensor
		want string
	}{
		{"fixed batch of 2", fixed, [][]infer.Tensor{{f32([]int64{2, 4}, 1, 2, 3, 4, 5, 6, 7, 8)}}, `instance 0: input "x": shape [2 4] does not match model [1 4]`},
		{"wrong dtype", add, [][]infer.Tensor{{{DType: infer.Int32, Shape: []int64{4}, Data: []int32{1, 2, 3, 4}}}}, "wrong dtype: got int32, want float32"},
		{"wrong width", add, [][]infer.Tensor{{f32([]int64{3}, 1, 2, 3)}}, `input "x": shape [3] does not match model [-1 4]`},
		{"data does not fit shape", add, [][]infer.Tensor{{f32([]int64{4}, 1, 2)}}, "needs 4 elements"},
		{"input count", add, [][]infer.Tensor{{}}, "got 0 inputs, model has 1"},
		{"over max_batch_size", capped, [][]infer.Tensor{{f32([]int64{3, 4}, make([]float32, 12)...)}}, `input "x": batch size 3 exceeds the model's max_batch_size 2`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := tt.e.Infer(context.Background(), tt.recs)
			var ie *infer.InputError
			if !errors.As(err, &ie) || !strings.Contains(err.Error(), tt.want) {
				t.Errorf("Infer: got %v, want *InputError containing %q", err, tt.want)
			}
		})
	}
}

func TestEngineConcurrentCallers(t *testing.T) {
	e := newEngine(t, infer.Config{ModelPath: model("add_f32"), Parallelism: 2, MaxBatch: 8})
	var wg sync.WaitGroup
	errs := make(chan error, 64)
	for i := range 64 {
		wg.Go(func() {
			for j := range 20 {
				v := float32(i*100 + j)
				out, err := e.Infer(context.Background(), [][]infer.Tensor{{f32([]int64{4}, v, v+1, v+2, v+3)}})
				if err != nil {
					errs <- err
					return
				}
				want := []float32{2*v + 1, 2*v + 3, 2*v + 5, 2*v + 7}
				if got := out[0][0].Data.([]float32); !reflect.DeepEqual(got, want) {
					errs <- fmt.Errorf("caller %d call %d: got %v, want %v", i, j, got, want)
					return
				}
			}
		})
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Error(err)
	}
}

func TestEngineLifecycle(t *testing.T) {
	requireORT(t)
	if _, err := infer.New(infer.Config{}); !errors.Is(err, infer.ErrConfigValidation) {
		t.Errorf("New(zero Config): got %v, want ErrConfigValidation", err)
	}
	if _, err := infer.New(infer.Config{ModelPath: t.TempDir()}); !errors.Is(err, infer.ErrNoModel) {
		t.Errorf("New(empty dir): got %v, want ErrNoModel", err)
	}
	e, err := infer.New(infer.Config{ModelPath: "testdata/add_f32.onnx"})
	if err != nil {
		t.Fatal(err)
	}
	if got := e.Info().Inputs[0].Name; got != "x" {
		t.Errorf("Info().Inputs[0].Name: got %q, want x", got)
	}
	if err := e.Close(); err != nil {
		t.Fatal(err)
	}
	if err := e.Close(); err != nil {
		t.Errorf("second Close: got %v, want nil", err)
	}
	if _, err := e.Infer(context.Background(), [][]infer.Tensor{{f32([]int64{4}, 1, 2, 3, 4)}}); !errors.Is(err, infer.ErrClosed) {
		t.Errorf("Infer after Close: got %v, want ErrClosed", err)
	}
}

// TestEngineRequestLargerThanQueue: 3,000 records, more than the queue
// holds, are served in chunks of MaxBatch and come back in order, each
// equal to the record run alone; a bad record among them is named by its
// index in the request.
func TestEngineRequestLargerThanQueue(t *testing.T) {
	ctx := context.Background()
	e := newEngine(t, infer.Config{ModelPath: model("add_f32"), MaxBatch: 32, QueueSize: 64})
	recs := make([][]infer.Tensor, 3000)
	for i := range recs {
		v := float32(i)
		recs[i] = []infer.Tensor{{DType: infer.Float32, Shape: []int64{4}, Data: []float32{v, -v, v / 2, 1}}}
	}
	outs, err := e.Infer(ctx, recs)
	if err != nil {
		t.Fatalf("Infer: %v", err)
	}
	for i, rec := range recs {
		one, err := e.Infer(ctx, [][]infer.Tensor{rec})
		if err != nil {
			t.Fatalf("record %d alone: %v", i, err)
		}
		if !reflect.DeepEqual(outs[i], one[0]) {
			t.Fatalf("record %d: got %+v, want %+v (alone)", i, outs[i], one[0])
		}
	}
	recs[2500] = []infer.Tensor{{DType: infer.Float32, Shape: []int64{3}, Data: []float32{1, 2, 3}}}
	_, err = e.Infer(ctx, recs)
	var ie *infer.InputError
	if !errors.As(err, &ie) || ie.Instance != 2500 {
		t.Errorf("got %v, want an *InputError of instance 2500", err)
	}
}

// TestThreadSpinning: ONNX Runtime takes the session option either way
// (spinning off is the default), and a model answers the same with and
// without it.
func TestThreadSpinning(t *testing.T) {
	in := f32([]int64{1, 4}, 1, 2, 3, 4)
	var got [2][]infer.Tensor
	for i, spin := range []bool{false, true} {
		e := newEngine(t, infer.Config{ModelPath: model("add_f32"), Threads: 2, ThreadSpinning: spin})
		outs, err := e.Infer(context.Background(), [][]infer.Tensor{{in}})
		if err != nil {
			t.Fatalf("ThreadSpinning %v: %v", spin, err)
		}
		got[i] = outs[0]
	}
	if !reflect.DeepEqual(got[0], got[1]) {
		t.Errorf("spinning off %+v, on %+v", got[0], got[1])
	}
}

// TestEngineStrings runs string records through the Engine from
// concurrent callers: the Batcher stacks their rows into one string
// tensor and splits the outputs back, each caller getting its own
// strings. A record holding a NUL byte is refused before it joins a batch,
// naming its instance and input.
func TestEngineStrings(t *testing.T) {
	e := newEngine(t, infer.Config{ModelPath: model("identity_str"), MaxBatch: 8})
	const callers = 8
	var wg sync.WaitGroup
	errs := make([]error, callers)
	for c := range callers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			var recs [][]infer.Tensor
			for r := range 3 {
				recs = append(recs, []infer.Tensor{{DType: infer.String, Shape: []int64{2}, Data: []string{fmt.Sprintf("c%d", c), strings.Repeat("é", r)}}})
			}
			outs, err := e.Infer(context.Background(), recs)
			if err != nil {
				errs[c] = err
				return
			}
			for r, rec := range outs {
				if !reflect.DeepEqual(rec[0], recs[r][0]) {
					errs[c] = fmt.Errorf("record %d: got %+v, want %+v", r, rec[0], recs[r][0])
					return
				}
			}
		}()
	}
	wg.Wait()
	for c, err := range errs {
		if err != nil {
			t.Errorf("caller %d: %v", c, err)
		}
	}

	_, err := e.Infer(context.Background(), [][]infer.Tensor{
		{{DType: infer.String, Shape: []int64{2}, Data: []string{"a", "b"}}},
		{{DType: infer.String, Shape: []int64{2}, Data: []string{"a\x00", "b"}}},
	})
	var ie *infer.InputError
	if !errors.As(err, &ie) || ie.Instance != 1 || ie.Input != "x" || !strings.Contains(err.Error(), "NUL byte") {
		t.Errorf("got %v, want an *InputError naming instance 1, input x and the NUL byte", err)
	}
}
