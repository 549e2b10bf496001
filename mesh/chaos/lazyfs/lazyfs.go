package lazyfs

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"sync"
	"syscall"
	"time"

	fusefs "github.com/hanwen/go-fuse/v2/fs"
	"github.com/hanwen/go-fuse/v2/fuse"
)

// Options configure a mount. The zero value means no capacity limit.
type Options struct {
	// Capacity is the most bytes the file system holds, counted as the
	// sum of its regular files' sizes (the backing directory's files
	// included); a write that would grow it past that fails with ENOSPC.
	// 0 (default) means no limit.
	Capacity int64
	// Debug prints every FUSE request and reply to stderr.
	Debug bool
}

// Validate reports the first invalid field, wrapping ErrInvalidOptions.
func (o Options) Validate() error {
	if o.Capacity < 0 {
		return fmt.Errorf("%w: Capacity %d is negative", ErrInvalidOptions, o.Capacity)
	}
	return nil
}

// FS is a mounted lazy file system (see the package comment for what it
// keeps and what PowerCut drops). Its methods are safe for concurrent
// use; Unmount is idempotent.
type FS struct {
	backing, mountpoint string
	server              *fuse.Server

	mu       sync.Mutex
	files    map[inodeKey]*entry // the files written since their last sync
	used     int64               // bytes in regular files
	capacity int64               // 0: no limit
	closed   bool
}

// Mount serves backing at mountpoint, both existing directories. Files
// already in backing count as synced. It returns ErrInvalidOptions, an
// error reading backing or mountpoint, or ErrNoFUSE (wrapping the cause)
// when the kernel does not let this process mount. As root it mounts
// with mount(2) directly, so it needs no fusermount.
func Mount(backing, mountpoint string, opts Options) (*FS, error) {
	if err := opts.Validate(); err != nil {
		return nil, err
	}
	backing, err := filepath.Abs(backing)
	if err != nil {
		return nil, err
	}
	if st, err := os.Stat(mountpoint); err != nil {
		return nil, fmt.Errorf("lazyfs: mount point: %w", err)
	} else if !st.IsDir() {
		return nil, fmt.Errorf("lazyfs: mount point %s is not a directory", mountpoint)
	}
	used, err := usage(backing)
	if err != nil {
		return nil, fmt.Errorf("lazyfs: backing dir: %w", err)
	}
	loop, err := fusefs.NewLoopbackRoot(backing)
	if err != nil {
		return nil, fmt.Errorf("lazyfs: backing dir: %w", err)
	}
	s := &FS{backing: backing, mountpoint: mountpoint, files: map[inodeKey]*entry{}, used: used, capacity: opts.Capacity}
	ln := loop.(*fusefs.LoopbackNode)
	root := &node{LoopbackNode: ln, fsys: s}
	ln.RootData.RootNode = root
	// No kernel caching of names or attributes: PowerCut changes sizes
	// behind the kernel's back. Data pages are dropped at every open
	// (no FOPEN_KEEP_CACHE) and by PowerCut's notifications.
	var zero time.Duration
	s.server, err = fusefs.Mount(mountpoint, root, &fusefs.Options{
		EntryTimeout: &zero, AttrTimeout: &zero, NegativeTimeout: &zero,
		MountOptions: fuse.MountOptions{
			DirectMount: os.Geteuid() == 0,
			FsName:      "lazyfs", // a path could hold a comma, which ends a mount option
			Name:        "lazyfs",
			Debug:       opts.Debug,
		},
	})
	if err != nil {
		return nil, fmt.Errorf("%w: mount %s: %w", ErrNoFUSE, mountpoint, err)
	}
	return s, nil
}

// Mountpoint is where the file system is mounted.
func (s *FS) Mountpoint() string { return s.mountpoint }

// PowerCut drops every write not synced, as a power loss drops the page
// cache: each file written since its last fsync gets back the content
// and size it had then (empty for a file never synced). Call it once the
// processes that wrote are dead (SIGKILL), as a machine's processes die
// with its power; a process that still has files open sees their content
// change under it. dropped is what Unsynced reported. The mount stays up:
// the next process finds what a reboot would.
func (s *FS) PowerCut() (dropped int64, err error) {
	s.mu.Lock()
	var errs []error
	var inodes []*fusefs.Inode
	for key, e := range s.files {
		dropped += e.written.total()
		if err := e.restore(); err != nil {
			errs = append(errs, fmt.Errorf("lazyfs: restore inode %d: %w", key.ino, err))
		}
		if e.inode != nil {
			inodes = append(inodes, e.inode)
		}
		s.forget(key)
	}
	used, err := usage(s.backing)
	if err != nil {
		errs = append(errs, fmt.Errorf("lazyfs: backing dir: %w", err))
	} else {
		s.used = used
	}
	s.mu.Unlock()
	// Outside the lock: the kernel may call back in while it drops pages.
	for _, in := range inodes {
		in.NotifyContent(0, 0) // ENOENT when the kernel had forgotten it: nothing cached
	}
	return dropped, errors.Join(errs...)
}

// Unsynced is the number of distinct bytes written since the last sync
// of their file, over all files: what PowerCut would drop now. A
// truncation is dropped too but counts no bytes.
func (s *FS) Unsynced() int64 {
	s.mu.Lock()
	defer s.mu.Unlock()
	var n int64
	for _, e := range s.files {
		n += e.written.total()
	}
	return n
}

// SetCapacity changes the limit of Options.Capacity at run time; 0 lifts
// it. Writes already past a new, lower limit stay; the next write that
// would grow the file system fails.
func (s *FS) SetCapacity(n int64) error {
	if err := (Options{Capacity: n}).Validate(); err != nil {
		return err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	s.capacity = n
	return nil
}

// Used is the number of bytes in the file system's regular files, as
// Capacity counts them.
func (s *FS) Used() int64 {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.used
}

// Unmount unmounts the file system and forgets what was not synced (the
// backing directory keeps everything written). When a process still has
// files open there it detaches the mount lazily, as umount -l does. It
// is idempotent.
func (s *FS) Unmount() error {
	s.mu.Lock()
	closed := s.closed
	s.closed = true
	s.mu.Unlock()
	if closed {
		return nil
	}
	err := s.server.Unmount()
	if err != nil && os.Geteuid() == 0 && syscall.Unmount(s.mountpoint, syscall.MNT_DETACH) == nil {
		err = nil
	}
	s.mu.Lock()
	for key := range s.files {
		s.forget(key)
	}
	s.mu.Unlock()
	if err != nil {
		return fmt.Errorf("lazyfs: unmount %s: %w", s.mountpoint, err)
	}
	return nil
}

// usage is the sum of the sizes of the regular files under dir, each
// inode counted once.
func usage(dir string) (int64, error) {
	var used int64
	seen := map[inodeKey]bool{}
	err := filepath.WalkDir(dir, func(_ string, d fs.DirEntry, err error) error {
		if err != nil || !d.Type().IsRegular() {
			return err
		}
		info, err := d.Info()
		if errors.Is(err, fs.ErrNotExist) {
			return nil // removed while we walked
		} else if err != nil {
			return err
		}
		st, ok := info.Sys().(*syscall.Stat_t)
		if !ok || seen[keyOf(st)] {
			return nil
		}
		seen[keyOf(st)] = true
		used += st.Size
		return nil
	})
	return used, err
}
