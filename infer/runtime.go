package infer

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"sync"

	ort "github.com/yalue/onnxruntime_go"
)

// ORTVersion is the ONNX Runtime release whose C API onnxruntime_go v1.27.0
// is built against; the library Init loads must be this version.
const ORTVersion = "1.24.1"

var (
	initMu   sync.Mutex
	initPath string
)

// Init loads the ONNX Runtime shared library at libraryPath and creates the
// process-wide ONNX Runtime environment. It is idempotent: calling it again
// with the same path returns nil; another path returns ErrInitMismatch,
// because ONNX Runtime cannot load two libraries in one process. Safe for
// concurrent use.
func Init(libraryPath string) error {
	initMu.Lock()
	defer initMu.Unlock()
	if initPath != "" {
		if libraryPath == initPath {
			return nil
		}
		return fmt.Errorf("%w: have %q, asked for %q", ErrInitMismatch, initPath, libraryPath)
	}
	if libraryPath == "" {
		return ErrNoLibrary
	}
	if _, err := os.Stat(libraryPath); err != nil {
		return fmt.Errorf("%w: %v", ErrNoLibrary, err)
	}
	ort.SetSharedLibraryPath(libraryPath)
	if err := ort.InitializeEnvironment(ort.WithLogLevelError()); err != nil {
		return fmt.Errorf("init ONNX Runtime %q: %w", libraryPath, err)
	}
	initPath = libraryPath
	return nil
}

func initialized() bool {
	initMu.Lock()
	defer initMu.Unlock()
	return initPath != ""
}

// DefaultLibraryPath is where `make ort` puts the library:
// <user cache dir>/cluster-serving/onnxruntime-<ORTVersion>/libonnxruntime.so.1.
// It returns "" when the user cache directory is unknown.
func DefaultLibraryPath() string {
	dir, err := os.UserCacheDir()
	if err != nil {
		return ""
	}
	return filepath.Join(dir, "cluster-serving", "onnxruntime-"+ORTVersion, "libonnxruntime.so.1")
}

// FindLibrary picks the ONNX Runtime library: explicit (a flag or config
// value) if set, else env (the caller passes $ONNXRUNTIME_LIB; infer reads no
// environment), else DefaultLibraryPath. A path that was named but does not
// exist is an error rather than a silent fallback. When nothing is found the
// error wraps ErrNoLibrary and tells the user to run `make ort`.
func FindLibrary(explicit, env string) (string, error) {
	for _, c := range []struct{ path, from string }{{explicit, "explicit path"}, {env, "ONNXRUNTIME_LIB"}} {
		if c.path == "" {
			continue
		}
		if _, err := os.Stat(c.path); err != nil {
			return "", fmt.Errorf("%w: %s %q: %v", ErrNoLibrary, c.from, c.path, errors.Unwrap(err))
		}
		return c.path, nil
	}
	if p := DefaultLibraryPath(); p != "" {
		if _, err := os.Stat(p); err == nil {
			return p, nil
		}
		return "", fmt.Errorf("%w (looked in %s)", ErrNoLibrary, p)
	}
	return "", ErrNoLibrary
}
