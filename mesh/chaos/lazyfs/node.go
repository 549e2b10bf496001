package lazyfs

import (
	"context"
	"os"
	"path/filepath"
	"syscall"

	fusefs "github.com/hanwen/go-fuse/v2/fs"
	"github.com/hanwen/go-fuse/v2/fuse"
	"golang.org/x/sys/unix"
)

// node is a loopback node that reports to its FS what changes content
// (writes through its handles, truncation) and what makes it durable
// (fsync). Everything else is the loopback's.
type node struct {
	*fusefs.LoopbackNode
	fsys *FS
}

var (
	_ fusefs.NodeWrapChilder    = (*node)(nil)
	_ fusefs.NodeCreater        = (*node)(nil)
	_ fusefs.NodeOpener         = (*node)(nil)
	_ fusefs.NodeSetattrer      = (*node)(nil)
	_ fusefs.NodeFsyncer        = (*node)(nil)
	_ fusefs.NodeUnlinker       = (*node)(nil)
	_ fusefs.NodeRenamer        = (*node)(nil)
	_ fusefs.NodeCopyFileRanger = (*node)(nil)
	_ fusefs.NodeStatfser       = (*node)(nil)
)

// WrapChild makes every node the loopback creates one of ours.
func (n *node) WrapChild(_ context.Context, ops fusefs.InodeEmbedder) fusefs.InodeEmbedder {
	return &node{LoopbackNode: ops.(*fusefs.LoopbackNode), fsys: n.fsys}
}

// backingPath is the node's path in the backing directory.
func (n *node) backingPath() string {
	return filepath.Join(n.RootData.Path, n.Path(nil))
}

// Create needs nothing of the journal: a new file is empty, which is
// also its content should the power go before its first fsync.
func (n *node) Create(ctx context.Context, name string, flags, mode uint32, out *fuse.EntryOut) (*fusefs.Inode, fusefs.FileHandle, uint32, syscall.Errno) {
	ch, fh, fuseFlags, errno := n.LoopbackNode.Create(ctx, name, flags, mode, out)
	if errno != 0 {
		return nil, nil, 0, errno
	}
	h, errno := n.fsys.wrap(ctx, fh, flags, ch)
	if errno != 0 {
		return nil, nil, 0, errno
	}
	return ch, h, fuseFlags, 0
}

// Open needs no O_TRUNC case: go-fuse does not ask for atomic O_TRUNC,
// so the kernel truncates through Setattr.
func (n *node) Open(ctx context.Context, flags uint32) (fusefs.FileHandle, uint32, syscall.Errno) {
	fh, fuseFlags, errno := n.LoopbackNode.Open(ctx, flags)
	if errno != 0 {
		return nil, 0, errno
	}
	h, errno := n.fsys.wrap(ctx, fh, flags, n.EmbeddedInode())
	if errno != 0 {
		return nil, 0, errno
	}
	return h, fuseFlags, 0
}

// Setattr journals a change of size (truncate, ftruncate) before it
// happens; the loopback does the rest.
func (n *node) Setattr(ctx context.Context, f fusefs.FileHandle, in *fuse.SetAttrIn, out *fuse.AttrOut) syscall.Errno {
	var inner fusefs.FileHandle // the loopback's own handle, or none
	h, _ := f.(*handle)
	if h != nil {
		inner = h.lf
	}
	do := func() syscall.Errno { return n.LoopbackNode.Setattr(ctx, inner, in, out) }
	size, ok := in.GetSize()
	if !ok {
		return do()
	}
	if h != nil {
		return n.fsys.resize(h.fd, n.EmbeddedInode(), int64(size), do)
	}
	bf, err := os.Open(n.backingPath())
	if err != nil {
		return fusefs.ToErrno(err)
	}
	defer bf.Close()
	return n.fsys.resize(int(bf.Fd()), n.EmbeddedInode(), int64(size), do)
}

// Fsync (and fdatasync) makes the file's current content what a power
// loss keeps. It does not fsync the backing file. On a directory it does
// nothing: names are durable at once.
func (n *node) Fsync(_ context.Context, f fusefs.FileHandle, _ uint32) syscall.Errno {
	if h, ok := f.(*handle); ok {
		return n.fsys.synced(h.fd)
	}
	return 0
}

// Unlink forgets the journal of a file that loses its last name.
func (n *node) Unlink(ctx context.Context, name string) syscall.Errno {
	gone := lastLink(filepath.Join(n.backingPath(), name))
	errno := n.LoopbackNode.Unlink(ctx, name)
	if errno == 0 {
		n.fsys.removed(gone)
	}
	return errno
}

// Rename forgets the journal of a file it replaces; the renamed file
// keeps its own, since the journal follows inodes.
func (n *node) Rename(ctx context.Context, name string, newParent fusefs.InodeEmbedder, newName string, flags uint32) syscall.Errno {
	var gone *removal
	if p, ok := newParent.(*node); ok && flags&unix.RENAME_EXCHANGE == 0 {
		gone = lastLink(filepath.Join(p.backingPath(), newName))
		var src syscall.Stat_t
		if gone != nil && syscall.Lstat(filepath.Join(n.backingPath(), name), &src) == nil && keyOf(&src) == gone.key {
			gone = nil // two names of one file: rename does nothing
		}
	}
	errno := n.LoopbackNode.Rename(ctx, name, newParent, newName, flags)
	if errno == 0 {
		n.fsys.removed(gone)
	}
	return errno
}

// CopyFileRange says ENOSYS, so that the kernel copies with reads and
// writes, which the journal sees.
func (n *node) CopyFileRange(context.Context, fusefs.FileHandle, uint64, *fusefs.Inode, fusefs.FileHandle, uint64, uint64, uint64) (uint32, syscall.Errno) {
	return 0, syscall.ENOSYS
}

// Statfs reports the capacity, when one is set, as the disk's size.
func (n *node) Statfs(ctx context.Context, out *fuse.StatfsOut) syscall.Errno {
	errno := n.LoopbackNode.Statfs(ctx, out)
	if errno == 0 {
		n.fsys.statfs(out)
	}
	return errno
}

// handle is an open regular file: the loopback's handle, whose writes
// and fallocates go through the FS's journal. It has no passthrough and
// no ioctl, which would write behind the journal's back.
type handle struct {
	lf    *fusefs.LoopbackFile
	fd    int // lf's descriptor, open until Release
	inode *fusefs.Inode
	fsys  *FS
	sync  bool // opened O_SYNC or O_DSYNC
}

var _ interface {
	fusefs.FileReader
	fusefs.FileWriter
	fusefs.FileWritever
	fusefs.FileReleaser
	fusefs.FileFlusher
	fusefs.FileGetattrer
	fusefs.FileLseeker
	fusefs.FileAllocater
} = (*handle)(nil)

// wrap turns the loopback's handle fh, opened with flags, into ours; on
// failure it releases fh.
func (s *FS) wrap(ctx context.Context, fh fusefs.FileHandle, flags uint32, inode *fusefs.Inode) (*handle, syscall.Errno) {
	lf, ok := fh.(*fusefs.LoopbackFile)
	var fd int
	if ok {
		fd, ok = lf.PassthroughFd() // the descriptor itself, valid until Release
	}
	if !ok {
		if r, isR := fh.(fusefs.FileReleaser); isR {
			r.Release(ctx)
		}
		return nil, syscall.EIO
	}
	return &handle{lf: lf, fd: fd, inode: inode, fsys: s, sync: flags&syscall.O_DSYNC != 0}, 0
}

func (h *handle) Read(ctx context.Context, dest []byte, off int64) (fuse.ReadResult, syscall.Errno) {
	return h.lf.Read(ctx, dest, off)
}

func (h *handle) Write(_ context.Context, data []byte, off int64) (uint32, syscall.Errno) {
	return h.fsys.write(h.fd, h.inode, [][]byte{data}, off, h.sync)
}

func (h *handle) Writev(_ context.Context, data [][]byte, off int64) (uint32, syscall.Errno) {
	return h.fsys.write(h.fd, h.inode, data, off, h.sync)
}

func (h *handle) Allocate(ctx context.Context, off, size uint64, mode uint32) syscall.Errno {
	return h.fsys.allocate(h.fd, h.inode, int64(off), int64(size), mode, func() syscall.Errno {
		return h.lf.Allocate(ctx, off, size, mode)
	})
}

func (h *handle) Release(ctx context.Context) syscall.Errno { return h.lf.Release(ctx) }

func (h *handle) Flush(ctx context.Context) syscall.Errno { return h.lf.Flush(ctx) }

func (h *handle) Getattr(ctx context.Context, out *fuse.AttrOut) syscall.Errno {
	return h.lf.Getattr(ctx, out)
}

func (h *handle) Lseek(ctx context.Context, off uint64, whence uint32) (uint64, syscall.Errno) {
	return h.lf.Lseek(ctx, off, whence)
}
