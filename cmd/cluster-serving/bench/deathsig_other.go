//go:build !linux

package bench

import "os/exec"

// dieWithParent does nothing off Linux, which has no parent-death signal:
// there only an interrupted run (SIGINT, SIGTERM) ends its children.
func dieWithParent(*exec.Cmd) {}
