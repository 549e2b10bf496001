package bench

import (
	"os/exec"
	"syscall"
)

// dieWithParent makes the kernel send cmd SIGKILL when the bench dies,
// even by SIGKILL or a crash, where no cleanup of ours runs. SIGKILL
// rather than SIGTERM: with its parent gone nobody reads what a child
// would finish, and a graceful stop could hang; none of the children
// (start, worker, rawchild, redis-server with --save "") starts processes
// of its own that SIGKILL would orphan. startProc says why it must fork
// on one thread.
func dieWithParent(cmd *exec.Cmd) {
	if cmd.SysProcAttr == nil {
		cmd.SysProcAttr = &syscall.SysProcAttr{}
	}
	cmd.SysProcAttr.Pdeathsig = syscall.SIGKILL
}
