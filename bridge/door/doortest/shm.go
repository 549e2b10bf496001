package doortest

import (
	"encoding/binary"
	"math"
	"os"
	"path/filepath"
	"testing"

	"github.com/cluster-serving/cluster-serving/bridge/door"
)

// SHMFile creates a file of size zero bytes in door.SHMDir, as
// tritonclient.utils.shared_memory's create_shared_memory_region does,
// removed when the test ends, and returns its key ("/NAME") and path. It
// skips the test on a machine without door.SHMDir (not Linux).
func SHMFile(tb testing.TB, size int) (key, path string) {
	tb.Helper()
	if fi, err := os.Stat(door.SHMDir); err != nil || !fi.IsDir() {
		tb.Skipf("no %s on this machine: system shared memory needs Linux", door.SHMDir)
	}
	f, err := os.CreateTemp(door.SHMDir, "cs-test-*")
	if err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(func() { _ = os.Remove(f.Name()) })
	if err := f.Truncate(int64(size)); err != nil {
		tb.Fatal(err)
	}
	if err := f.Close(); err != nil {
		tb.Fatal(err)
	}
	return "/" + filepath.Base(f.Name()), f.Name()
}

// F32Bytes is v as raw little-endian FP32, as a region holds a tensor.
func F32Bytes(v ...float32) []byte {
	b := make([]byte, 0, 4*len(v))
	for _, x := range v {
		b = binary.LittleEndian.AppendUint32(b, math.Float32bits(x))
	}
	return b
}

// F32s reads raw little-endian FP32.
func F32s(b []byte) []float32 {
	v := make([]float32, len(b)/4)
	for i := range v {
		v[i] = math.Float32frombits(binary.LittleEndian.Uint32(b[4*i:]))
	}
	return v
}
