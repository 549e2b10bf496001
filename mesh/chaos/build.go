package chaos

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
)

// Binaries are the programs the suite runs.
type Binaries struct {
	NATSServer     string // nats-server at the go.mod version
	ClusterServing string // cluster-serving built from this checkout
	RedisServer    string // redis-server from PATH
}

// BuildBinaries builds nats-server (once per version: it is a dependency of
// this module, so the module proxy and go.sum pin it) and cluster-serving
// (every time; the Go build cache makes a rebuild cheap) into dir, and finds
// redis-server on PATH. root is the module root.
func BuildBinaries(root, dir string) (Binaries, error) {
	var b Binaries
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return b, err
	}
	version, err := goOut(root, "list", "-m", "-f", "{{.Version}}", "github.com/nats-io/nats-server/v2")
	if err != nil {
		return b, err
	}
	b.NATSServer = filepath.Join(dir, "nats-server-"+version)
	if _, err := os.Stat(b.NATSServer); err != nil {
		if _, err := goOut(root, "build", "-o", b.NATSServer, "github.com/nats-io/nats-server/v2"); err != nil {
			return b, err
		}
	}
	b.ClusterServing = filepath.Join(dir, "cluster-serving")
	if _, err := goOut(root, "build", "-o", b.ClusterServing, "./cmd/cluster-serving"); err != nil {
		return b, err
	}
	b.RedisServer, err = exec.LookPath("redis-server")
	if err != nil {
		return b, fmt.Errorf("redis-server not found on PATH (apt-get install redis-server): %w", err)
	}
	return b, nil
}

func goOut(dir string, args ...string) (string, error) {
	cmd := exec.Command("go", args...)
	cmd.Dir = dir
	out, err := cmd.CombinedOutput()
	if err != nil {
		return "", fmt.Errorf("go %s: %v\n%s", strings.Join(args, " "), err, out)
	}
	return strings.TrimSpace(string(out)), nil
}
