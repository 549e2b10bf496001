package lazyfs

import (
	"cmp"
	"syscall"

	fusefs "github.com/hanwen/go-fuse/v2/fs"
	"github.com/hanwen/go-fuse/v2/fuse"
	"golang.org/x/sys/unix"
)

// The FS's side of each operation that changes content. Each holds s.mu
// across the change itself, so that PowerCut never meets half a write.

// track returns the log of the file open at fd, whose stat is st,
// starting one if the file had none. s.mu is held.
func (s *FS) track(fd int, st *syscall.Stat_t, inode *fusefs.Inode) (*entry, error) {
	if e, ok := s.files[keyOf(st)]; ok {
		return e, nil
	}
	e, key, err := newEntry(fd, inode)
	if err != nil {
		return nil, err
	}
	s.files[key] = e
	return e, nil
}

// forget drops the log of key, if any: the file is synced, or gone.
// s.mu is held.
func (s *FS) forget(key inodeKey) {
	if e, ok := s.files[key]; ok {
		e.f.Close()
		delete(s.files, key)
	}
}

// fits says whether the file system may grow by grow bytes. s.mu is held.
func (s *FS) fits(grow int64) bool {
	return s.capacity == 0 || grow <= 0 || s.used+grow <= s.capacity
}

// write writes iov at off through fd, a descriptor of inode, after
// saving the synced content it overwrites. A write that would grow the
// file system past its capacity fails whole with ENOSPC. sync says fd was
// opened with O_SYNC or O_DSYNC: the write is durable as it returns, and
// the whole file with it.
func (s *FS) write(fd int, inode *fusefs.Inode, iov [][]byte, off int64, sync bool) (uint32, syscall.Errno) {
	var n int64
	for _, b := range iov {
		n += int64(len(b))
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	var st syscall.Stat_t
	if err := syscall.Fstat(fd, &st); err != nil {
		return 0, fusefs.ToErrno(err)
	}
	if !s.fits(off + n - st.Size) {
		return 0, syscall.ENOSPC
	}
	var e *entry
	if !sync {
		var err error
		if e, err = s.track(fd, &st, inode); err != nil {
			return 0, fusefs.ToErrno(err)
		}
		if err := e.save(off, n); err != nil {
			return 0, fusefs.ToErrno(err)
		}
	}
	w, err := unix.Pwritev(fd, iov, off)
	if w > 0 {
		s.used += max(0, off+int64(w)-st.Size)
		if e != nil {
			e.written = e.written.add(off, off+int64(w))
		}
	}
	if sync && err == nil {
		s.forget(keyOf(&st))
	}
	return uint32(max(w, 0)), fusefs.ToErrno(err)
}

// resize sets the size of the file open at fd, a descriptor of inode,
// through do, after saving the synced content a shrink cuts off. A
// truncation never fails for lack of space: growing makes a hole.
func (s *FS) resize(fd int, inode *fusefs.Inode, size int64, do func() syscall.Errno) syscall.Errno {
	s.mu.Lock()
	defer s.mu.Unlock()
	var st syscall.Stat_t
	if err := syscall.Fstat(fd, &st); err != nil {
		return fusefs.ToErrno(err)
	}
	e, err := s.track(fd, &st, inode)
	if err != nil {
		return fusefs.ToErrno(err)
	}
	if err := e.save(size, e.size-size); err != nil {
		return fusefs.ToErrno(err)
	}
	return s.grown(fd, st.Size, do())
}

// allocate runs do, an fallocate of [off, off+n) with mode on fd, a
// descriptor of inode, after saving the synced content it may zero. One
// that would grow the file past the capacity fails with ENOSPC.
func (s *FS) allocate(fd int, inode *fusefs.Inode, off, n int64, mode uint32, do func() syscall.Errno) syscall.Errno {
	s.mu.Lock()
	defer s.mu.Unlock()
	var st syscall.Stat_t
	if err := syscall.Fstat(fd, &st); err != nil {
		return fusefs.ToErrno(err)
	}
	if mode&unix.FALLOC_FL_KEEP_SIZE == 0 && !s.fits(off+n-st.Size) {
		return syscall.ENOSPC
	}
	e, err := s.track(fd, &st, inode)
	if err != nil {
		return fusefs.ToErrno(err)
	}
	if err := e.save(off, n); err != nil {
		return fusefs.ToErrno(err)
	}
	return s.grown(fd, st.Size, do())
}

// grown counts the change of fd's size from before, once errno says the
// operation that changed it succeeded. s.mu is held.
func (s *FS) grown(fd int, before int64, errno syscall.Errno) syscall.Errno {
	var st syscall.Stat_t
	if errno == 0 && syscall.Fstat(fd, &st) == nil {
		s.used += st.Size - before
	}
	return errno
}

// synced marks the file open at fd synced: its current content is what
// a power loss keeps.
func (s *FS) synced(fd int) syscall.Errno {
	var st syscall.Stat_t
	if err := syscall.Fstat(fd, &st); err != nil {
		return fusefs.ToErrno(err)
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	s.forget(keyOf(&st))
	return 0
}

// removal is a regular file about to lose its last name.
type removal struct {
	key  inodeKey
	size int64
}

// lastLink returns the removal that unlinking or renaming over the
// backing path would make; nil when that frees no file.
func lastLink(path string) *removal {
	var st syscall.Stat_t
	if syscall.Lstat(path, &st) != nil || st.Mode&syscall.S_IFMT != syscall.S_IFREG || st.Nlink != 1 {
		return nil
	}
	return &removal{key: keyOf(&st), size: st.Size}
}

// removed accounts for r once it happened: the file is gone for good
// (names are durable), and so are its log and its bytes.
func (s *FS) removed(r *removal) {
	if r == nil {
		return
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	s.forget(r.key)
	s.used -= r.size
}

// statfs reports the capacity, when one is set, as the disk's size.
func (s *FS) statfs(out *fuse.StatfsOut) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.capacity == 0 {
		return
	}
	unit := uint64(out.Frsize)
	if unit == 0 {
		unit = uint64(cmp.Or(out.Bsize, pageSize))
	}
	free := uint64(max(0, s.capacity-s.used)) / unit
	out.Blocks, out.Bfree, out.Bavail = uint64(s.capacity)/unit, free, free
}
