package infer_test

import (
	"context"
	"encoding/binary"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/cluster-serving/cluster-serving/infer"
)

// warmupDir is a model directory whose warmup/ folder holds files.
func warmupDir(tb testing.TB, files map[string][]byte) string {
	tb.Helper()
	dir := tb.TempDir()
	if err := os.MkdirAll(filepath.Join(dir, infer.WarmupFolder), 0o755); err != nil {
		tb.Fatal(err)
	}
	for name, b := range files {
		if err := os.WriteFile(filepath.Join(dir, infer.WarmupFolder, name), b, 0o644); err != nil {
			tb.Fatal(err)
		}
	}
	return dir
}

// le is the little-endian bytes of vs, as Triton's warmup files hold them.
func le[T int32 | float32](vs ...T) []byte {
	b, err := binary.Append(nil, binary.LittleEndian, vs)
	if err != nil {
		panic(err)
	}
	return b
}

// lengthPrefixed frames strings as Triton's TYPE_STRING warmup files do.
func lengthPrefixed(ss ...string) []byte {
	var b []byte
	for _, s := range ss {
		b = binary.LittleEndian.AppendUint32(b, uint32(len(s)))
		b = append(b, s...)
	}
	return b
}

func sample(rows int, ins ...infer.WarmupInput) infer.WarmupSample {
	return infer.WarmupSample{Name: "w1", Rows: rows, Inputs: ins}
}

func x(dt infer.DType, src infer.WarmupSource, file string, dims ...int64) infer.WarmupInput {
	return infer.WarmupInput{Name: "x", DType: dt, Dims: dims, Source: src, File: file}
}

// TestWarmupRuns: samples of zero, random and file data run on the real
// engine, Count times on each session; data the model refuses (a zero
// divisor, a string that is no number) shows that the values reached it.
func TestWarmupRuns(t *testing.T) {
	dir := warmupDir(t, map[string][]byte{
		"x.bin":     le[float32](1, 2, 3, 4),
		"long.bin":  le[float32](1, 2, 3, 4, 5), // Triton reads what it needs
		"div.bin":   le[int32](1, 2, 4, 5),
		"zeros.bin": le[int32](1, 0, 4, 5),
		"nums.str":  lengthPrefixed("1.5", "2", "-3"),
		"words.str": lengthPrefixed("1.5", "two", "3"),
	})
	add := newEngine(t, infer.Config{ModelPath: model("add_f32"), Parallelism: 2})
	div := newEngine(t, infer.Config{ModelPath: model("div_i32"), MaxRequestBatch: 8})
	cast := newEngine(t, infer.Config{ModelPath: model("cast_str_f32")})
	for _, tc := range []struct {
		name     string
		e        *infer.Engine
		s        infer.WarmupSample
		runs     int
		wantErr  string // "" for none
		sessions int
	}{
		{"zero", add, sample(2, x(infer.Float32, infer.WarmupZero, "", 4)), 2, "", 2},
		{"count", add, infer.WarmupSample{Name: "w1", Rows: 1, Count: 3, Inputs: []infer.WarmupInput{x(infer.Float32, infer.WarmupZero, "", 4)}}, 6, "", 2},
		{"random", add, sample(8, x(infer.Float32, infer.WarmupRandom, "", 4)), 2, "", 2},
		{"file", add, sample(3, x(infer.Float32, infer.WarmupFile, "x.bin", 4)), 2, "", 2},
		{"longer file", add, sample(1, x(infer.Float32, infer.WarmupFile, "long.bin", 4)), 2, "", 2},
		{"no batch dim", add, sample(0, x(infer.Float32, infer.WarmupZero, "", 2, 4)), 2, "", 2},
		// div_i32 is y = 100 / x: zeros are refused by its division guard.
		{"zero divisor", div, sample(1, x(infer.Int32, infer.WarmupZero, "", 4)), 0, `model_warmup "w1": input "x": holds a zero`, 1},
		{"random divisor", div, sample(8, x(infer.Int32, infer.WarmupRandom, "", 4)), 1, "", 1},
		{"file divisor", div, sample(8, x(infer.Int32, infer.WarmupFile, "div.bin", 4)), 1, "", 1},
		{"file zero divisor", div, sample(2, x(infer.Int32, infer.WarmupFile, "zeros.bin", 4)), 0, `input "x": holds a zero`, 1},
		{"above max_batch_size", div, sample(9, x(infer.Int32, infer.WarmupFile, "div.bin", 4)), 0, `exceeds the model's max_batch_size 8`, 1},
		{"strings", cast, sample(2, x(infer.String, infer.WarmupFile, "nums.str", 3)), 1, "", 1},
		// ONNX Runtime's Cast fails on "two": a run error.
		{"run error", cast, sample(1, x(infer.String, infer.WarmupFile, "words.str", 3)), 0, `model_warmup "w1": run 1: run model`, 1},
	} {
		t.Run(tc.name, func(t *testing.T) {
			runs, err := tc.e.Warmup(context.Background(), dir, tc.s)
			switch {
			case tc.wantErr == "" && err != nil:
				t.Fatalf("got %v, want no error", err)
			case tc.wantErr != "" && (err == nil || !strings.Contains(err.Error(), tc.wantErr)):
				t.Fatalf("got %v, want an error holding %q", err, tc.wantErr)
			}
			if runs != tc.runs {
				t.Errorf("runs: got %d, want %d (%d sessions)", runs, tc.runs, tc.sessions)
			}
		})
	}
}

// TestWarmupErrors: a sample that cannot run names itself, the input and
// the cause, and the engine still serves.
func TestWarmupErrors(t *testing.T) {
	dir := warmupDir(t, map[string][]byte{
		"x.bin":     le[float32](1, 2, 3),
		"short.str": lengthPrefixed("1", "2"),
		"torn.str":  lengthPrefixed("1", "2", "3")[:9], // "2"'s length, not its byte
		"stub.str":  lengthPrefixed("1", "2", "3")[:7], // half of "2"'s length
	})
	if err := os.WriteFile(filepath.Join(dir, "outside.bin"), le[float32](1, 2, 3, 4), 0o644); err != nil {
		t.Fatal(err)
	}
	add := newEngine(t, infer.Config{ModelPath: model("add_f32")})
	two := newEngine(t, infer.Config{ModelPath: model("two_io")})
	cast := newEngine(t, infer.Config{ModelPath: model("cast_str_f32")})
	divComputed := newEngine(t, infer.Config{ModelPath: model("div_computed_i32")})
	a := func(src infer.WarmupSource) infer.WarmupInput {
		return infer.WarmupInput{Name: "a", DType: infer.Float32, Dims: []int64{3}, Source: src}
	}
	for _, tc := range []struct {
		name string
		e    *infer.Engine
		s    infer.WarmupSample
		want string
	}{
		{"short file", add, sample(1, x(infer.Float32, infer.WarmupFile, "x.bin", 4)), `model_warmup "w1": input "x": file warmup/x.bin holds 12 bytes, 16 wanted`},
		{"missing file", add, sample(1, x(infer.Float32, infer.WarmupFile, "none.bin", 4)), `model_warmup "w1": input "x": input_data_file: open ` + filepath.Join(dir, "warmup", "none.bin")},
		{"outside warmup/", add, sample(1, x(infer.Float32, infer.WarmupFile, "../outside.bin", 4)), `input "x": input_data_file "../outside.bin": want a file name inside the model's warmup/ folder`},
		{"unknown input", add, sample(1, x(infer.Float32, infer.WarmupZero, "", 4), infer.WarmupInput{Name: "q", DType: infer.Float32, Dims: []int64{4}}),
			`model_warmup "w1": input "q": not an input of the model: its inputs are [x]`},
		{"missing input", two, sample(1, a(infer.WarmupZero)), `model_warmup "w1": input "b": missing`},
		{"data type", add, sample(1, x(infer.Int32, infer.WarmupZero, "", 4)), `model_warmup "w1": input "x": data type int32 differs from the model's float32`},
		{"variable dim", add, sample(1, x(infer.Float32, infer.WarmupZero, "", -1)), `model_warmup "w1": input "x": dims [-1]: every dim must be set`},
		{"wrong dims", add, sample(1, x(infer.Float32, infer.WarmupZero, "", 5)), `model_warmup "w1": input "x": shape [1 5] does not match model [-1 4]`},
		{"few strings", cast, sample(1, x(infer.String, infer.WarmupFile, "short.str", 3)), `input "x": file warmup/short.str holds 2 strings, 3 wanted`},
		{"torn string", cast, sample(1, x(infer.String, infer.WarmupFile, "torn.str", 3)), `input "x": file warmup/torn.str: string 1: length 1 runs past the end of the file`},
		{"torn length", cast, sample(1, x(infer.String, infer.WarmupFile, "stub.str", 3)), `input "x": file warmup/stub.str: string 1: 2 bytes left, too few for its 4-byte length`},
		{"random on unguarded division", divComputed, sample(1, x(infer.Int32, infer.WarmupRandom, "", 4)), `input "x": random data on a model that divides integers`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			runs, err := tc.e.Warmup(context.Background(), dir, tc.s)
			if err == nil || !strings.Contains(err.Error(), tc.want) || runs != 0 {
				t.Fatalf("got %d runs, %v; want none and an error holding %q", runs, err, tc.want)
			}
		})
	}
	// The engines still serve.
	outs, err := add.Infer(context.Background(), [][]infer.Tensor{{{DType: infer.Float32, Shape: []int64{4}, Data: []float32{1, 2, 3, 4}}}})
	if err != nil || outs[0][0].Data.([]float32)[3] != 9 {
		t.Errorf("add after failed warmups: got %v, %v; want 2x+1", outs, err)
	}
}
