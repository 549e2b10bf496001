package respdoor_test

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/cluster-serving/cluster-serving/bridge/respdoor"
)

// nodeClient installs testdata/node (apache-arrow and node-redis, pinned
// with their checksums by package-lock.json; npm ci checks them) into a
// cache outside the repository, once per lock file, and returns the
// directory holding the client script and its node_modules.
func nodeClient(tb testing.TB) string {
	tb.Helper()
	need(tb, "node and npm", "apt-get install nodejs npm", "npm", "--version")
	lock, err := os.ReadFile("testdata/node/package-lock.json")
	if err != nil {
		tb.Fatal(err)
	}
	sum := sha256.Sum256(lock)
	cache, err := os.UserCacheDir()
	if err != nil {
		tb.Fatal(err)
	}
	dir := filepath.Join(cache, "cluster-serving", "node-resp-"+hex.EncodeToString(sum[:8]))
	for _, f := range []string{"package.json", "package-lock.json", "node_client.mjs"} {
		b, err := os.ReadFile(filepath.Join("testdata/node", f))
		if err == nil {
			err = os.MkdirAll(dir, 0o755)
		}
		if err == nil {
			err = os.WriteFile(filepath.Join(dir, f), b, 0o644)
		}
		if err != nil {
			tb.Fatal(err)
		}
	}
	if _, err := os.Stat(filepath.Join(dir, "node_modules", "apache-arrow")); err != nil {
		if out, err := exec.Command("npm", "ci", "--prefix", dir, "--no-audit", "--no-fund").CombinedOutput(); err != nil {
			need(tb, "the npm registry (npm ci of testdata/node)", string(out), "false")
		}
	}
	return dir
}

// nodeResult is what testdata/node/node_client.mjs prints.
type nodeResult struct {
	Value string    `json:"value"`
	Data  []float64 `json:"data"`
	Shape []int     `json:"shape"`
}

// TestNodeArrowClient: a Node client (node-redis, apache-arrow) writes a
// tensor in the original's Arrow layout, XADDs it, polls, DELs and
// decodes the Arrow result, against the Redis door and the RESP door:
// byte-identical values, and y = 2x + 1.
func TestNodeArrowClient(t *testing.T) {
	dir := nodeClient(t)
	s := startDoor(t, respdoor.Config{}, nil, add)
	redisAddr := s.redisDoors(t)
	run := func(addr string) nodeResult {
		port := addr[strings.LastIndexByte(addr, ':')+1:]
		out, err := exec.Command("node", filepath.Join(dir, "node_client.mjs"), port, "add", "x", "node-1", "1,2,3,4").Output()
		if err != nil {
			var stderr []byte
			if ee, ok := err.(*exec.ExitError); ok {
				stderr = ee.Stderr
			}
			t.Fatalf("node_client.mjs on %s: %v\n%s", addr, err, stderr)
		}
		var r nodeResult
		if err := json.Unmarshal(out, &r); err != nil {
			t.Fatalf("node_client.mjs: %v: %s", err, out)
		}
		return r
	}
	want, got := run(redisAddr), run(s.addr)
	if got.Value != want.Value {
		t.Errorf("RESP door %.60q, Redis door %.60q: want byte-identical values", got.Value, want.Value)
	}
	b, _ := json.Marshal([]any{got.Data, got.Shape})
	if string(b) != "[[3,5,7,9],[4]]" {
		t.Errorf("decoded with apache-arrow: got %s, want [[3,5,7,9],[4]] (y = 2x+1)", b)
	}
}
