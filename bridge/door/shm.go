package door

import (
	"cmp"
	"maps"
	"os"
	"runtime/debug"
	"slices"
	"strings"
	"sync"
	"syscall"

	"github.com/cluster-serving/cluster-serving/infer/status"
)

// SHMDir is where system shared memory regions live: POSIX shm_open(key)
// is the file SHMDir/key on Linux, which is how Triton's clients
// (tritonclient.utils.shared_memory, perf_analyzer) create them.
const SHMDir = "/dev/shm"

// Shared memory parameters of a tensor (Triton's shared memory
// extension): its data is in a registered region, at an offset, of a size.
const (
	ParamSHMRegion   = "shared_memory_region"
	ParamSHMOffset   = "shared_memory_offset"
	ParamSHMByteSize = "shared_memory_byte_size"
)

// IsSHMParam reports whether k, a tensor parameter's key, is one of the
// shared memory parameters.
func IsSHMParam(k string) bool {
	return k == ParamSHMRegion || k == ParamSHMOffset || k == ParamSHMByteSize
}

// DropSHMParams deletes the shared memory parameters from a tensor's
// parameters, once the door has read the tensor from, or will write it
// to, its region.
func DropSHMParams[V any](params map[string]V) {
	maps.DeleteFunc(params, func(k string, _ V) bool { return IsSHMParam(k) })
}

// DefaultSharedMemory is the registry of a door whose
// Config.SharedMemory is nil. Triton keeps one registry per server, which
// its HTTP and gRPC endpoints share: a region registered over HTTP serves
// gRPC requests. cmd builds both doors from one door.Config, so a
// process-wide default gives every door of the process the same registry
// without a line of wiring; tests that want their own pass one.
var DefaultSharedMemory = NewSharedMemory()

// SharedMemory is a registry of system shared memory regions: each
// name maps a window (offset, byte size) of a file of SHMDir into the
// process. It is safe for concurrent use. A region unregistered while a
// request copies from or into it stays mapped until that copy ends.
// Its errors are *status.Error: 400 for a bad key, size or window, 404
// for an unknown region.
type SharedMemory struct {
	mu      sync.Mutex
	regions map[string]*region
}

// NewSharedMemory returns an empty registry.
func NewSharedMemory() *SharedMemory { return &SharedMemory{regions: map[string]*region{}} }

// Region is a registered region as the status APIs list it: its name,
// the key of its file, and the window of that file it maps.
type Region struct {
	Name     string `json:"name"`
	Key      string `json:"key"`
	Offset   int64  `json:"offset"`
	ByteSize int64  `json:"byte_size"`
}

// region is one mapping. refs counts the copies in flight (guarded by
// SharedMemory.mu); gone, set by Unregister, makes the last of them unmap.
type region struct {
	Region
	mapping []byte // what mmap returned, from the page below Offset
	data    []byte // the window: mapping[Offset%page:][:ByteSize]
	refs    int
	gone    bool
}

// Register maps byteSize bytes at offset of the file of key (SHMDir/key,
// a leading '/' dropped, as shm_open does) under name. The key must name
// a regular file directly in SHMDir, and the window must lie within it.
// A name already registered is an error, as in Triton.
func (s *SharedMemory) Register(name, key string, offset, byteSize int64) error {
	switch {
	case name == "":
		return status.Errorf(status.BadInput, "shared memory region name is empty")
	case offset < 0 || byteSize <= 0:
		return status.Errorf(status.BadInput, "shared memory region '%s': offset %d and byte_size %d: want offset >= 0 and byte_size > 0", name, offset, byteSize)
	}
	path, err := shmPath(name, key)
	if err != nil {
		return err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if _, ok := s.regions[name]; ok {
		return status.Errorf(status.BadInput, "shared memory region '%s' already in manager", name)
	}
	r, err := mapRegion(path, Region{Name: name, Key: key, Offset: offset, ByteSize: byteSize})
	if err != nil {
		return err
	}
	s.regions[name] = r
	return nil
}

// shmPath is the file of key, which must stay in SHMDir: one optional
// leading '/', then a file name without '/' or "..".
func shmPath(name, key string) (string, error) {
	file := strings.TrimPrefix(key, "/")
	if file == "" || strings.ContainsAny(file, "/\x00") || strings.Contains(file, "..") {
		return "", status.Errorf(status.BadInput, "shared memory region '%s': invalid key %q: want \"/NAME\", a file directly in %s (no '/' after the first, no \"..\")", name, key, SHMDir)
	}
	return SHMDir + "/" + file, nil
}

// mapRegion maps the window of reg in the file at path, read-write and
// shared, so that the client sees what the door writes. It does not
// follow a symbolic link and maps regular files only.
func mapRegion(path string, reg Region) (*region, error) {
	f, err := os.OpenFile(path, os.O_RDWR|syscall.O_NOFOLLOW|syscall.O_NONBLOCK, 0)
	if err != nil {
		return nil, status.Errorf(status.BadInput, "shared memory region '%s': unable to open key %q: %v", reg.Name, reg.Key, unwrapPath(err))
	}
	defer f.Close() // the mapping outlives the descriptor
	fi, err := f.Stat()
	switch {
	case err != nil:
		return nil, status.Errorf(status.BadInput, "shared memory region '%s': stat key %q: %v", reg.Name, reg.Key, unwrapPath(err))
	case !fi.Mode().IsRegular():
		return nil, status.Errorf(status.BadInput, "shared memory region '%s': key %q is not a regular file", reg.Name, reg.Key)
	case reg.Offset > fi.Size() || reg.ByteSize > fi.Size()-reg.Offset:
		return nil, status.Errorf(status.BadInput, "shared memory region '%s': offset %d + byte_size %d runs past the %d bytes of key %q", reg.Name, reg.Offset, reg.ByteSize, fi.Size(), reg.Key)
	}
	start := reg.Offset - reg.Offset%int64(os.Getpagesize()) // mmap's offset is page-aligned
	m, err := syscall.Mmap(int(f.Fd()), start, int(reg.Offset-start+reg.ByteSize), syscall.PROT_READ|syscall.PROT_WRITE, syscall.MAP_SHARED)
	if err != nil {
		return nil, status.Errorf(status.BadInput, "shared memory region '%s': map key %q: %v", reg.Name, reg.Key, err)
	}
	return &region{Region: reg, mapping: m, data: m[reg.Offset-start:][:reg.ByteSize]}, nil
}

// unwrapPath drops the *os.PathError's path, which is ours, not the
// client's key.
func unwrapPath(err error) error {
	if pe, ok := err.(*os.PathError); ok {
		return pe.Err
	}
	return err
}

// Unregister unmaps the region name, or every region when name is "".
// An unknown name is no error, as in Triton. A region in use stays
// mapped until its copies end.
func (s *SharedMemory) Unregister(name string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	for n, r := range s.regions {
		if name == "" || n == name {
			delete(s.regions, n)
			r.gone = true
			r.unmapIfIdle()
		}
	}
}

// unmapIfIdle unmaps r once it is unregistered and no copy uses it.
// munmap fails only for a range that is not mapped, which never happens
// here, so its error is dropped.
func (r *region) unmapIfIdle() {
	if r.gone && r.refs == 0 && r.mapping != nil {
		_ = syscall.Munmap(r.mapping)
		r.mapping, r.data = nil, nil
	}
}

// Status lists the region name, or every region by name when name is "";
// an unknown name is a 404.
func (s *SharedMemory) Status(name string) ([]Region, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if name != "" {
		r, ok := s.regions[name]
		if !ok {
			return nil, status.Errorf(status.NotFound, "Unable to find system shared memory region: '%s'", name)
		}
		return []Region{r.Region}, nil
	}
	out := make([]Region, 0, len(s.regions))
	for _, r := range s.regions {
		out = append(out, r.Region)
	}
	slices.SortFunc(out, func(a, b Region) int { return cmp.Compare(a.Name, b.Name) })
	return out, nil
}

// Check reports whether size bytes at offset lie within the region name:
// what a door checks of an output's region before it submits the request.
func (s *SharedMemory) Check(name string, offset, size int64) error {
	r, err := s.acquire(name, offset, size)
	if err != nil {
		return err
	}
	s.release(r)
	return nil
}

// AppendRead appends the size bytes at offset of the region name to dst.
func (s *SharedMemory) AppendRead(dst []byte, name string, offset, size int64) ([]byte, error) {
	r, err := s.acquire(name, offset, size)
	if err != nil {
		return dst, err
	}
	defer s.release(r)
	err = faultSafe(r, func() { dst = append(dst, r.data[offset:offset+size]...) })
	return dst, err
}

// Write copies data into the region name at offset.
func (s *SharedMemory) Write(name string, offset int64, data []byte) error {
	r, err := s.acquire(name, offset, int64(len(data)))
	if err != nil {
		return err
	}
	defer s.release(r)
	return faultSafe(r, func() { copy(r.data[offset:], data) })
}

// acquire finds the region name and checks that size bytes at offset lie
// within it; the caller releases it after its copy.
func (s *SharedMemory) acquire(name string, offset, size int64) (*region, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	r, ok := s.regions[name]
	switch {
	case !ok:
		return nil, status.Errorf(status.BadInput, "shared memory region '%s' is not registered: register it first (POST /v2/systemsharedmemory/region/%s/register or gRPC SystemSharedMemoryRegister)", name, name)
	case offset < 0 || size < 0 || offset > r.ByteSize || size > r.ByteSize-offset:
		return nil, status.Errorf(status.BadInput, "shared memory region '%s': offset %d needs %d bytes, the region has %d bytes past the offset (byte_size %d)",
			name, offset, size, max(0, r.ByteSize-max(0, offset)), r.ByteSize)
	}
	r.refs++
	return r, nil
}

func (s *SharedMemory) release(r *region) {
	s.mu.Lock()
	defer s.mu.Unlock()
	r.refs--
	r.unmapIfIdle()
}

// faultSafe runs the copy f of r, turning the fault of a file the client
// shrank after registering it (SIGBUS past its end) into a 400 instead
// of a crash of the process.
func faultSafe(r *region, f func()) (err error) {
	defer debug.SetPanicOnFault(debug.SetPanicOnFault(true))
	defer func() {
		if p := recover(); p != nil {
			if _, ok := p.(interface{ Addr() uintptr }); !ok {
				panic(p)
			}
			err = status.Errorf(status.BadInput, "shared memory region '%s': key %q no longer holds offset %d + byte_size %d (was the file truncated?)", r.Name, r.Key, r.Offset, r.ByteSize)
		}
	}()
	f()
	return nil
}

// OverLimit is the 413 of a request that, with the bytes of its inputs
// in shared memory, would be n bytes, over limit (the door's bound on
// request bodies, httpMaxBodyBytes): the door copies those bytes into
// the request it queues, which a region must not make larger than a
// body may be. nil when n fits or limit is 0.
func OverLimit(n, limit int64) error {
	if limit > 0 && n > limit {
		return status.Errorf(status.TooLarge, "the request with its shared memory inputs would be %d bytes, over the %d of httpMaxBodyBytes", n, limit)
	}
	return nil
}

// Ref is where a tensor's data is in shared memory: the parameters
// shared_memory_region, shared_memory_offset (default 0) and
// shared_memory_byte_size of an input or a requested output.
type Ref struct {
	Region           string
	Offset, ByteSize int64
}

// NewRef is tensor's Ref from its shared memory parameters (nil: absent):
// nil when it has none, an error (400, naming the tensor) when it has
// an offset or byte size without a region or a region without a byte
// size, or a negative one.
func NewRef(tensor string, region *string, offset, byteSize *int64) (*Ref, error) {
	if region == nil {
		if offset != nil || byteSize != nil {
			return nil, status.Errorf(status.BadInput, "tensor %s: parameters %s and %s need %s", tensor, ParamSHMOffset, ParamSHMByteSize, ParamSHMRegion)
		}
		return nil, nil
	}
	if byteSize == nil {
		return nil, status.Errorf(status.BadInput, "tensor %s: parameter %s needs %s", tensor, ParamSHMRegion, ParamSHMByteSize)
	}
	ref := &Ref{Region: *region, ByteSize: *byteSize}
	if offset != nil {
		ref.Offset = *offset
	}
	if ref.Offset < 0 || ref.ByteSize < 0 {
		return nil, status.Errorf(status.BadInput, "tensor %s: %s %d and %s %d must not be negative", tensor, ParamSHMOffset, ref.Offset, ParamSHMByteSize, ref.ByteSize)
	}
	return ref, nil
}

// WriteOutput writes the bytes of output tensor into its region ref,
// which they must fit (ref.ByteSize, the size the request gave).
func (s *SharedMemory) WriteOutput(tensor string, ref Ref, data []byte) error {
	if int64(len(data)) > ref.ByteSize {
		return status.Errorf(status.BadInput, "output %s: shared memory region '%s' at offset %d needs %d bytes, %s gives %d",
			tensor, ref.Region, ref.Offset, len(data), ParamSHMByteSize, ref.ByteSize)
	}
	return s.Write(ref.Region, ref.Offset, data)
}
