package lazyfs

import (
	"errors"
	"fmt"
	"io"
	"os"
	"syscall"

	fusefs "github.com/hanwen/go-fuse/v2/fs"
)

// pageSize is the unit of the undo log: a write saves the synced content
// of each page it overlaps once, the first time, as the page cache would
// hold a dirty page.
const pageSize = 4096

// inodeKey names a backing inode: the journal follows inodes, not names,
// so that content survives renames and hard links share one log.
type inodeKey struct{ dev, ino uint64 }

func keyOf(st *syscall.Stat_t) inodeKey { return inodeKey{dev: uint64(st.Dev), ino: st.Ino} }

// entry is the undo log of one file written since its last sync: enough
// to put back the content that sync made durable. A file without an entry
// holds its synced content. Its owner, the FS, guards it with its mutex.
type entry struct {
	f       *os.File         // read-write on the backing inode; closed when the entry goes
	inode   *fusefs.Inode    // the kernel's node, whose cache a restore drops; nil if unknown
	size    int64            // the size at the last sync
	pages   map[int64][]byte // page index → content at the last sync, for each overwritten page below size
	written spans            // the bytes written since the last sync
}

// newEntry starts the log of the file open at fd, whose current content
// is its synced content. It opens a descriptor of its own, through
// /proc/self/fd, since fd may be write-only and closes at release.
func newEntry(fd int, inode *fusefs.Inode) (*entry, inodeKey, error) {
	f, err := os.OpenFile(fmt.Sprintf("/proc/self/fd/%d", fd), os.O_RDWR, 0)
	if err != nil {
		return nil, inodeKey{}, err
	}
	var st syscall.Stat_t
	if err := syscall.Fstat(int(f.Fd()), &st); err != nil {
		f.Close()
		return nil, inodeKey{}, err
	}
	return &entry{f: f, inode: inode, size: st.Size, pages: map[int64][]byte{}}, keyOf(&st), nil
}

// save keeps the synced content of the pages that [off, off+n) overlaps,
// before a write, a truncation or an fallocate changes them. Pages past
// the synced size hold nothing to keep: the restore truncates them away.
func (e *entry) save(off, n int64) error {
	end := min(off+n, e.size)
	for p := off / pageSize; p*pageSize < end; p++ {
		if _, ok := e.pages[p]; ok {
			continue
		}
		// An unsaved page below the synced size is whole in the file: a
		// truncation below it would have saved it.
		buf := make([]byte, min(pageSize, e.size-p*pageSize))
		if _, err := e.f.ReadAt(buf, p*pageSize); err != nil && !errors.Is(err, io.EOF) {
			return err
		}
		e.pages[p] = buf
	}
	return nil
}

// restore puts back the synced content and size. A file no longer named
// anywhere is left alone: names are durable, so it stays gone.
func (e *entry) restore() error {
	var st syscall.Stat_t
	if err := syscall.Fstat(int(e.f.Fd()), &st); err != nil {
		return err
	}
	if st.Nlink == 0 {
		return nil
	}
	for p, b := range e.pages {
		if _, err := e.f.WriteAt(b, p*pageSize); err != nil {
			return err
		}
	}
	return e.f.Truncate(e.size)
}

// span is the half-open byte range [lo, hi).
type span struct{ lo, hi int64 }

// spans is a sorted list of disjoint, non-adjacent ranges.
type spans []span

// add returns s with [lo, hi) merged in.
func (s spans) add(lo, hi int64) spans {
	if lo >= hi {
		return s
	}
	out := make(spans, 0, len(s)+1)
	i := 0
	for ; i < len(s) && s[i].hi < lo; i++ {
		out = append(out, s[i])
	}
	for ; i < len(s) && s[i].lo <= hi; i++ {
		lo, hi = min(lo, s[i].lo), max(hi, s[i].hi)
	}
	out = append(out, span{lo, hi})
	return append(out, s[i:]...)
}

// total is the number of bytes s covers.
func (s spans) total() int64 {
	var n int64
	for _, r := range s {
		n += r.hi - r.lo
	}
	return n
}
