package modelconfig_test

import (
	"errors"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"google.golang.org/protobuf/proto"

	"github.com/cluster-serving/cluster-serving/infer/modelconfig"
)

func TestParseUnknownFields(t *testing.T) {
	const clean = `name: "m"
max_batch_size: 8
input [ { name: "x" data_type: TYPE_FP32 dims: [ 4 ] } ]
dynamic_batching { max_queue_delay_microseconds: 100 }
`
	tests := []struct {
		name string
		text string
		want []string // one fragment per warning
	}{
		{"none", clean, nil},
		{"scalar at top", "colour: blue\n" + clean, []string{"unknown field colour ignored (line 1:1)"}},
		{"signs, extension, utf-8", "a: - 1 [x.y]: -inf\nb: 'é' c: 2\n" + clean, []string{
			"unknown field a ignored (line 1:1)", "unknown field [x.y] ignored (line 1:8)",
			"unknown field b ignored (line 2:1)", "unknown field c ignored (line 2:8)",
		}},
		{
			"nested, list, message, strings",
			`name: "m"
max_batch_size: 8 # ok
input [ { name: "x" data_type: TYPE_FP32 shape_hint: [1, 2] dims: [ 4 ] } ]
extra { a: "}" b: [ { c: 1 } ] }
dynamic_batching { max_queue_delay_microseconds: 100 preserve: 'it''s' }
tags: "a" "b";
`,
			[]string{
				"unknown field shape_hint ignored (line 3:42)",
				"unknown field extra ignored (line 4:1)",
				"unknown field preserve ignored (line 5:54)",
				"unknown field tags ignored (line 6:1)",
			},
		},
	}
	want, _, err := modelconfig.Parse([]byte(clean))
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			got, warnings, err := modelconfig.Parse([]byte(tc.text))
			if err != nil {
				t.Fatal(err)
			}
			if !proto.Equal(got, want) {
				t.Errorf("got %v, want %v", got, want)
			}
			if len(warnings) != len(tc.want) {
				t.Fatalf("got warnings %q, want %d", warnings, len(tc.want))
			}
			for i, w := range tc.want {
				if !strings.HasPrefix(warnings[i], "config.pbtxt: ") || !strings.Contains(warnings[i], w) {
					t.Errorf("warning %d: got %q, want %q", i, warnings[i], w)
				}
			}
		})
	}
}

func TestParseSyntaxError(t *testing.T) {
	tests := []struct{ text, at string }{
		{"name: \"m\"\nmax_batch_size: \"eight\"\n", "config.pbtxt:2:17: "},
		{"input [ { name: \"x\" }\n", "config.pbtxt:2:1: "},
		{"instance_group { kind: KIND_TPU }", "config.pbtxt:1:24: "},
	}
	for _, tc := range tests {
		_, _, err := modelconfig.Parse([]byte(tc.text))
		if !errors.Is(err, modelconfig.ErrSyntax) || !strings.Contains(err.Error(), tc.at) {
			t.Errorf("Parse(%q): got %v, want ErrSyntax at %s", tc.text, err, tc.at)
		}
	}
}

func TestRead(t *testing.T) {
	dir := t.TempDir()
	cfg, warnings, err := modelconfig.Read(dir)
	if cfg != nil || warnings != nil || err != nil {
		t.Errorf("no file: got %v, %v, %v; want nil, nil, nil", cfg, warnings, err)
	}
	path := filepath.Join(dir, modelconfig.FileName)
	if err := os.WriteFile(path, []byte("name: \"m\"\nbogus: 1\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	cfg, warnings, err = modelconfig.Read(dir)
	if err != nil || cfg.GetName() != "m" || len(warnings) != 1 || !strings.HasPrefix(warnings[0], path+": unknown field bogus") {
		t.Errorf("got %v, %q, %v; want name m and one warning naming %s", cfg, warnings, err, path)
	}
	if err := os.WriteFile(path, []byte("name: m m\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if _, _, err = modelconfig.Read(dir); !errors.Is(err, modelconfig.ErrSyntax) || !strings.Contains(err.Error(), path+":1:") {
		t.Errorf("got %v, want ErrSyntax naming %s:1:", err, path)
	}
}

// FuzzParse feeds Parse, and what takes its result, any bytes: nothing
// may panic, and a config without error is a config.
func FuzzParse(f *testing.F) {
	seeds, _ := filepath.Glob(filepath.Join(triton, "*", "*", "*", "*"))
	more, _ := filepath.Glob(filepath.Join(triton, "model_repository", "*", "config.pbtxt"))
	for _, p := range append(seeds, more...) {
		if b, err := os.ReadFile(p); err == nil && !strings.HasSuffix(p, ".onnx") && !slices.Contains([]string{"1", "LICENSE"}, filepath.Base(p)) {
			f.Add(b)
		}
	}
	f.Add([]byte("x { y: [ '\\'' , \"}\" ] # ]\n} z: <a: 1> input [{name: \"i\" q: 1}]"))
	f.Fuzz(func(t *testing.T, b []byte) {
		cfg, _, err := modelconfig.Parse(b)
		if err != nil {
			return
		}
		if cfg == nil {
			t.Fatal("nil config without error")
		}
		_ = modelconfig.SettingsOf(cfg)
		_, _ = modelconfig.Versions(cfg, []int64{1, 2, 3})
	})
}
