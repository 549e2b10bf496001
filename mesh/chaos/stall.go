package chaos

import (
	"context"
	"fmt"
	"os/exec"
	"runtime"
	"syscall"
	"time"
)

// NATSPause stops the work queue leader's process (SIGSTOP) for hold,
// then lets it go on (SIGCONT): a server that hangs (a GC pause, a stalled
// disk, a VM descheduled) with its connections open. The others elect new
// leaders; its clients must not be answered twice when it comes back
// with what it held.
func NATSPause(hold time.Duration) Scenario {
	return Scenario{Name: fmt.Sprintf("nats leader paused %v", hold), GapTarget: 5 * time.Second,
		Fault: func(ctx context.Context, c *Cluster, _ *Load) (string, error) {
			leader, _ := c.WorkLeader(ctx)
			n := c.NATS[max(c.nodeIndex(leader), 0)]
			pid := n.Pid()
			if pid == 0 {
				return n.name, fmt.Errorf("%s is not running", n.name)
			}
			if err := syscall.Kill(-pid, syscall.SIGSTOP); err != nil {
				return n.name, err
			}
			time.Sleep(hold)
			if err := syscall.Kill(-pid, syscall.SIGCONT); err != nil {
				return n.name, err
			}
			return n.name, c.waitNATSNode(ctx, n)
		}}
}

// CPUStarve runs two busy processes per core for hold, beside the
// cluster: every process is starved of CPU at once (issue 25's rows).
func CPUStarve(hold time.Duration) Scenario {
	return Scenario{Name: fmt.Sprintf("cpu starved %v", hold), GapTarget: 5 * time.Second,
		Fault: func(ctx context.Context, _ *Cluster, _ *Load) (string, error) {
			var spins []*exec.Cmd
			for range 2 * runtime.NumCPU() {
				cmd := exec.Command("sh", "-c", "while :; do :; done")
				cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
				if err := cmd.Start(); err != nil {
					return "", err
				}
				spins = append(spins, cmd)
			}
			time.Sleep(hold)
			for _, cmd := range spins {
				_ = cmd.Process.Kill()
				_ = cmd.Wait()
			}
			return fmt.Sprintf("%d busy processes", len(spins)), nil
		}}
}
