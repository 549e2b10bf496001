package infer_test

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/cluster-serving/cluster-serving/infer"
)

func TestFindLibrary(t *testing.T) {
	dir := t.TempDir()
	lib := filepath.Join(dir, "libonnxruntime.so.1")
	if err := os.WriteFile(lib, nil, 0o644); err != nil {
		t.Fatal(err)
	}
	missing := filepath.Join(dir, "nope.so")
	tests := []struct {
		name, explicit, env string
		want                string
		wantErr             bool
	}{
		{"explicit wins", lib, missing, lib, false},
		{"env used", "", lib, lib, false},
		{"explicit missing", missing, lib, "", true},
		{"env missing", "", missing, "", true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := infer.FindLibrary(tt.explicit, tt.env)
			if (err != nil) != tt.wantErr {
				t.Fatalf("FindLibrary(%q, %q) error = %v, want error %v", tt.explicit, tt.env, err, tt.wantErr)
			}
			if got != tt.want {
				t.Errorf("FindLibrary(%q, %q) = %q, want %q", tt.explicit, tt.env, got, tt.want)
			}
			if err != nil {
				if !errors.Is(err, infer.ErrNoLibrary) || !strings.Contains(err.Error(), "run `make ort`") {
					t.Errorf("got error %q, want it to wrap ErrNoLibrary and say run `make ort`", err)
				}
			}
		})
	}
}

func TestInitIdempotent(t *testing.T) {
	requireORT(t)
	lib, _ := infer.FindLibrary("", os.Getenv("ONNXRUNTIME_LIB"))
	if err := infer.Init(lib); err != nil {
		t.Errorf("second Init(%q) = %v, want nil", lib, err)
	}
	if err := infer.Init("/other/libonnxruntime.so"); !errors.Is(err, infer.ErrInitMismatch) {
		t.Errorf("Init(other path) = %v, want ErrInitMismatch", err)
	}
}
