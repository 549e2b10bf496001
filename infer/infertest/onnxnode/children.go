package onnxnode

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// A SIGFPE or SIGSEGV inside ONNX Runtime's C++ code ends the whole
// process, which no recover can stop, so suites run their cases in child
// processes: the test binary itself, re-executed with ChildCasesEnv set,
// whose TestMain calls Child. A child reports each case as it goes; the
// parent (RunChildren) names the case a child died in and starts a new
// child after it.

// Environment of a child: the file listing its case directories, one per
// line, and the file it appends its report to.
const (
	ChildCasesEnv  = "CLUSTER_SERVING_NODE_CHILD_CASES"
	ChildReportEnv = "CLUSTER_SERVING_NODE_CHILD_REPORT"
)

// IsChild reports whether this process is a child RunChildren started.
func IsChild() bool { return os.Getenv(ChildCasesEnv) != "" }

// Child runs every case listed in the file $ChildCasesEnv, appending to
// $ChildReportEnv a line "start <case>" before each and run's result as
// JSON after. The start line is written (and reaches the kernel) before
// the case runs, so it survives the child's death. It returns the exit
// code of the child.
func Child(run func(dir string) any) int {
	list, err := os.ReadFile(os.Getenv(ChildCasesEnv))
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 3
	}
	f, err := os.OpenFile(os.Getenv(ChildReportEnv), os.O_WRONLY|os.O_APPEND|os.O_CREATE, 0o644)
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 3
	}
	defer f.Close()
	for _, dir := range strings.Fields(string(list)) {
		fmt.Fprintf(f, "start %s\n", filepath.Base(dir))
		b, err := json.Marshal(run(dir))
		if err != nil {
			fmt.Fprintln(os.Stderr, err)
			return 3
		}
		fmt.Fprintf(f, "%s\n", b)
	}
	return 0
}

// ChildTimeout bounds one child: a case that hangs is killed and named.
const ChildTimeout = 5 * time.Minute

// RunChildren runs cases in child processes, one after another, and
// returns each finished case's JSON result by case name, and for a case
// a child died in, how it died.
func RunChildren(tb testing.TB, cases []string) (done map[string]json.RawMessage, deaths map[string]string) {
	tb.Helper()
	done, deaths = make(map[string]json.RawMessage, len(cases)), map[string]string{}
	tmp := tb.TempDir()
	for n, rest := 0, cases; len(rest) > 0; n++ {
		list := filepath.Join(tmp, fmt.Sprintf("cases%d", n))
		report := filepath.Join(tmp, fmt.Sprintf("report%d", n))
		if err := os.WriteFile(list, []byte(strings.Join(rest, "\n")), 0o644); err != nil {
			tb.Fatal(err)
		}
		ctx, cancel := context.WithTimeout(context.Background(), ChildTimeout)
		cmd := exec.CommandContext(ctx, os.Args[0], "-test.run=^$")
		cmd.Env = append(os.Environ(), ChildCasesEnv+"="+list, ChildReportEnv+"="+report)
		var stderr bytes.Buffer
		cmd.Stdout, cmd.Stderr = &stderr, &stderr
		runErr := cmd.Run()
		hung := ctx.Err() != nil // before cancel, which sets it too
		cancel()
		finished, started, err := readReport(report)
		if err != nil && !os.IsNotExist(err) {
			tb.Fatalf("child %d: %v", n, err)
		}
		for _, r := range finished {
			done[r.name] = r.result
		}
		rest = rest[len(finished):]
		if started == "" {
			if len(rest) > 0 {
				tb.Fatalf("child %d stopped before a case (%v): %s", n, runErr, stderr.String())
			}
			break
		}
		deaths[started] = deathCause(runErr, hung, stderr.String())
		rest = rest[1:]
	}
	return done, deaths
}

// RunChildrenAs runs cases as RunChildren does and decodes each finished
// case's JSON result into a T; a case a child died in gets died(name,
// how) instead.
func RunChildrenAs[T any](tb testing.TB, cases []string, died func(name, how string) T) map[string]T {
	tb.Helper()
	done, deaths := RunChildren(tb, cases)
	out := make(map[string]T, len(cases))
	for name, raw := range done {
		var r T
		if err := json.Unmarshal(raw, &r); err != nil {
			tb.Fatalf("%s: report %s: %v", name, raw, err)
		}
		out[name] = r
	}
	for name, how := range deaths {
		out[name] = died(name, how)
	}
	return out
}

// deathCause says how a child died: its exit (a signal's name), and the
// first line of its stderr that names a panic or a signal.
func deathCause(runErr error, hung bool, stderr string) string {
	cause := fmt.Sprint(runErr)
	if hung {
		cause = fmt.Sprintf("killed after %v (hung): %v", ChildTimeout, runErr)
	}
	for _, line := range strings.Split(stderr, "\n") {
		if strings.HasPrefix(line, "panic:") || strings.HasPrefix(line, "fatal error:") || strings.HasPrefix(line, "SIG") {
			return cause + ": " + line
		}
	}
	return cause
}

type reported struct {
	name   string
	result json.RawMessage
}

// readReport reads a child's report: the finished cases' results, and
// the case it started last without finishing ("" when none).
func readReport(path string) (done []reported, started string, err error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, "", err
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	sc.Buffer(make([]byte, 1<<20), 16<<20)
	for sc.Scan() {
		line := sc.Text()
		if name, ok := strings.CutPrefix(line, "start "); ok {
			started = name
			continue
		}
		if started == "" {
			return nil, "", fmt.Errorf("report line %q before any start line", line)
		}
		done, started = append(done, reported{started, json.RawMessage(line)}), ""
	}
	return done, started, sc.Err()
}
