package door_test

import (
	"bytes"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/cluster-serving/cluster-serving/bridge/door"
	"github.com/cluster-serving/cluster-serving/bridge/door/doortest"
	"github.com/cluster-serving/cluster-serving/infer/status"
)

// fill writes a pattern (byte i%251) over path's size bytes and returns it.
func fill(tb testing.TB, path string, size int) []byte {
	tb.Helper()
	b := make([]byte, size)
	for i := range b {
		b[i] = byte(i % 251)
	}
	if err := os.WriteFile(path, b, 0o600); err != nil {
		tb.Fatal(err)
	}
	return b
}

func TestSharedMemoryReadWrite(t *testing.T) {
	key, path := doortest.SHMFile(t, 3*4096)
	want := fill(t, path, 3*4096)
	s := door.NewSharedMemory()
	// An offset off a page boundary: the window still starts there.
	if err := s.Register("r", key, 4100, 200); err != nil {
		t.Fatal(err)
	}
	got, err := s.AppendRead([]byte("head"), "r", 10, 50)
	if err != nil || !bytes.Equal(got, append([]byte("head"), want[4110:4160]...)) {
		t.Fatalf("AppendRead: got %v %v, want head and bytes 4110..4160 of the file", got, err)
	}
	if err := s.Write("r", 190, []byte("0123456789")); err != nil {
		t.Fatal(err)
	}
	file, _ := os.ReadFile(path)
	if string(file[4290:4300]) != "0123456789" || !bytes.Equal(file[4100:4290], want[4100:4290]) {
		t.Errorf("after Write at 190: file bytes 4290..4300 are %q, want 0123456789 and the rest untouched", file[4290:4300])
	}
	st, err := s.Status("")
	if err != nil || len(st) != 1 || st[0] != (door.Region{Name: "r", Key: key, Offset: 4100, ByteSize: 200}) {
		t.Errorf("Status: got %+v %v", st, err)
	}
	s.Unregister("r")
	if st, _ := s.Status(""); len(st) != 0 {
		t.Errorf("Status after Unregister: got %+v, want none", st)
	}
}

func TestSharedMemoryErrors(t *testing.T) {
	key, path := doortest.SHMFile(t, 64)
	link := filepath.Join(door.SHMDir, filepath.Base(path)+"-link")
	if err := os.Symlink("/etc/hostname", link); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = os.Remove(link) })
	s := door.NewSharedMemory()
	if err := s.Register("r", key, 0, 32); err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		name string
		err  func() error
		st   int
		want string
	}{
		{"double register", func() error { return s.Register("r", key, 0, 8) }, 400, "shared memory region 'r' already in manager"},
		{"escaping key", func() error { return s.Register("x", "../etc/passwd", 0, 8) }, 400, `invalid key "../etc/passwd"`},
		{"key with a directory", func() error { return s.Register("x", "/a/b", 0, 8) }, 400, "invalid key"},
		{"dot dot", func() error { return s.Register("x", "/..", 0, 8) }, 400, "invalid key"},
		{"slash only", func() error { return s.Register("x", "/", 0, 8) }, 400, "invalid key"},
		{"symbolic link", func() error { return s.Register("x", "/"+filepath.Base(link), 0, 8) }, 400, "unable to open key"},
		{"missing file", func() error { return s.Register("x", "/cs-test-none", 0, 8) }, 400, "unable to open key \"/cs-test-none\": no such file"},
		{"past the file", func() error { return s.Register("x", key, 60, 8) }, 400, "offset 60 + byte_size 8 runs past the 64 bytes"},
		{"zero size", func() error { return s.Register("x", key, 0, 0) }, 400, "want offset >= 0 and byte_size > 0"},
		{"no name", func() error { return s.Register("", key, 0, 8) }, 400, "name is empty"},
		{"status of unknown", func() error { _, err := s.Status("nope"); return err }, 404, "Unable to find system shared memory region: 'nope'"},
		{"read unknown", func() error { _, err := s.AppendRead(nil, "nope", 0, 4); return err }, 400, "'nope' is not registered"},
		{"read past the region", func() error { _, err := s.AppendRead(nil, "r", 16, 64); return err }, 400,
			"shared memory region 'r': offset 16 needs 64 bytes, the region has 16 bytes past the offset (byte_size 32)"},
		{"write past the region", func() error { return s.Write("r", 30, []byte("abc")) }, 400, "offset 30 needs 3 bytes, the region has 2"},
		{"output too large", func() error { return s.WriteOutput("y", door.Ref{Region: "r", ByteSize: 2}, []byte("abc")) }, 400,
			"output y: shared memory region 'r' at offset 0 needs 3 bytes, shared_memory_byte_size gives 2"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			err := tt.err()
			if status.Of(err) != tt.st || err == nil || !strings.Contains(err.Error(), tt.want) {
				t.Errorf("got %v (status %d), want status %d and %q", err, status.Of(err), tt.st, tt.want)
			}
		})
	}
	s.Unregister("nope") // unknown: no error, as in Triton
	if st, _ := s.Status(""); len(st) != 1 {
		t.Errorf("Status: got %+v, want r alone", st)
	}
}

// A client that shrinks its file after registering it gets a 400, and
// the process does not die of SIGBUS.
func TestSharedMemoryTruncated(t *testing.T) {
	key, path := doortest.SHMFile(t, 8192)
	s := door.NewSharedMemory()
	if err := s.Register("r", key, 0, 8192); err != nil {
		t.Fatal(err)
	}
	if err := os.Truncate(path, 0); err != nil {
		t.Fatal(err)
	}
	_, err := s.AppendRead(nil, "r", 4096, 16)
	if status.Of(err) != 400 || !strings.Contains(err.Error(), "was the file truncated?") {
		t.Errorf("read of a truncated region: got %v, want a 400 saying so", err)
	}
	if err := s.Write("r", 4096, []byte("x")); status.Of(err) != 400 {
		t.Errorf("write into a truncated region: got %v, want 400", err)
	}
}

// Regions unregistered and registered again while others copy from and
// into them: every copy succeeds or says the region is not registered.
func TestSharedMemoryUnregisterInFlight(t *testing.T) {
	key, _ := doortest.SHMFile(t, 1<<16)
	s := door.NewSharedMemory()
	var wg sync.WaitGroup
	var stop atomic.Bool
	errs := make(chan error, 8)
	for i := range 4 {
		wg.Go(func() {
			for !stop.Load() {
				var err error
				if i%2 == 0 {
					_, err = s.AppendRead(nil, "r", 0, 1<<16)
				} else {
					err = s.Write("r", 0, make([]byte, 1<<16))
				}
				if err != nil && !strings.Contains(err.Error(), "is not registered") {
					errs <- err
					return
				}
			}
		})
	}
	for range 300 {
		if err := s.Register("r", key, 0, 1<<16); err != nil {
			t.Fatal(err)
		}
		s.Unregister("")
	}
	stop.Store(true)
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Errorf("copy during unregister: %v", err)
	}
}

func TestNewRef(t *testing.T) {
	str := func(s string) *string { return &s }
	num := func(n int64) *int64 { return &n }
	tests := []struct {
		name         string
		region       *string
		offset, size *int64
		want         *door.Ref
		err          string
	}{
		{"none", nil, nil, nil, nil, ""},
		{"region and size", str("r"), nil, num(16), &door.Ref{Region: "r", ByteSize: 16}, ""},
		{"all three", str("r"), num(8), num(16), &door.Ref{Region: "r", Offset: 8, ByteSize: 16}, ""},
		{"no size", str("r"), num(8), nil, nil, "parameter shared_memory_region needs shared_memory_byte_size"},
		{"size without region", nil, nil, num(16), nil, "need shared_memory_region"},
		{"offset without region", nil, num(1), nil, nil, "need shared_memory_region"},
		{"negative offset", str("r"), num(-1), num(16), nil, "must not be negative"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := door.NewRef("x", tt.region, tt.offset, tt.size)
			if tt.err != "" {
				var se *status.Error
				if !errors.As(err, &se) || se.Status != 400 || !strings.Contains(se.Message, tt.err) || !strings.Contains(se.Message, "tensor x") {
					t.Errorf("got %v, want a 400 naming tensor x and saying %q", err, tt.err)
				}
				return
			}
			if err != nil || (got == nil) != (tt.want == nil) || got != nil && *got != *tt.want {
				t.Errorf("got %+v %v, want %+v", got, err, tt.want)
			}
		})
	}
}
