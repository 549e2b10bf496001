package respdoor_test

import (
	"bytes"
	"encoding/base64"
	"encoding/json"
	"os"
	"os/exec"
	"strings"
	"testing"

	"github.com/cluster-serving/cluster-serving/bridge/door/doortest"
	"github.com/cluster-serving/cluster-serving/bridge/respdoor"
	"github.com/cluster-serving/cluster-serving/infer"
	"github.com/cluster-serving/cluster-serving/infer/infertest"
	"github.com/cluster-serving/cluster-serving/mesh/meshtest"
)

// need skips (fails in CI) when a client program is missing.
func need(tb testing.TB, what, install string, cmd ...string) {
	tb.Helper()
	if err := exec.Command(cmd[0], cmd[1:]...).Run(); err != nil {
		if os.Getenv("CLUSTER_SERVING_REQUIRE_DEPS") == "1" {
			tb.Fatalf("%s missing: %s", what, install)
		}
		tb.Skipf("%s missing: %s", what, install)
	}
}

// TestOriginalPythonClient runs the original client's calls through
// redis-py (testdata/original_client.py: enqueue with its INFO check,
// query, dequeue) against a Redis door on a real redis-server and against
// the RESP door, with the same records: an ndarray and an image as
// InputQueue.enqueue writes them (pyarrow payloads), and an image as JSON
// (serde stream). Every value must be byte-identical.
func TestOriginalPythonClient(t *testing.T) {
	need(t, "python3-redis", "apt-get install python3-redis", "/usr/bin/python3", "-c", "import redis")
	image := doortest.Served{Name: "img", File: "image_mean",
		Engine: infer.Config{ImageResize: [2]int{224, 224}, PostProcessing: "topN(2)"}}
	s := startDoor(t, respdoor.Config{}, nil, doortest.Served{Name: "add128", File: "add_f32_128"}, image)
	addr := s.redisDoors(t)
	fixture := func(name string) string { return strings.TrimSpace(string(infertest.Fixture(t, "payloads/"+name))) }
	cat := base64.StdEncoding.EncodeToString(infertest.Fixture(t, "images/cat1.jpeg"))
	catJSON, _ := json.Marshal(map[string]any{"instances": []any{map[string]any{"image": cat}}})
	spec := map[string]any{
		"records": []map[string]any{
			{"job": "add128", "uri": "t", "fields": map[string]string{"data": fixture("ndarray-128-base64")}},
			{"job": "img", "uri": "arrow-image", "fields": map[string]string{"data": fixture("image-3_224_224-arrow-base64")}},
			{"job": "img", "uri": "cat1", "fields": map[string]string{"data": string(catJSON), "serde": "stream"}},
		},
		"query":   [][2]string{{"add128", "t"}},
		"dequeue": "img",
	}
	run := func(port string) map[string]map[string]string {
		spec["port"] = port
		in, _ := json.Marshal(spec)
		var out, stderr bytes.Buffer
		cmd := exec.Command("/usr/bin/python3", "testdata/original_client.py")
		cmd.Stdin, cmd.Stdout, cmd.Stderr = bytes.NewReader(in), &out, &stderr
		if err := cmd.Run(); err != nil {
			t.Fatalf("original_client.py on port %s: %v\n%s", port, err, stderr.String())
		}
		var got map[string]map[string]string
		if err := json.Unmarshal(out.Bytes(), &got); err != nil {
			t.Fatalf("original_client.py: %v: %s", err, out.String())
		}
		return got
	}
	want := run(addr[strings.LastIndexByte(addr, ':')+1:])
	got := run(s.addr[strings.LastIndexByte(s.addr, ':')+1:])
	for _, part := range []string{"query", "dequeue"} {
		for uri, w := range want[part] {
			if got[part][uri] != w {
				t.Errorf("%s %s: RESP door %.60q, Redis door %.60q: want byte-identical", part, uri, got[part][uri], w)
			}
		}
		if len(got[part]) != len(want[part]) {
			t.Errorf("%s: got %d values, want %d", part, len(got[part]), len(want[part]))
		}
	}
	if v := got["dequeue"]["cat1"]; !strings.HasPrefix(v, "[[") {
		t.Errorf("cat1: got %.60q, want a topN(2) string", v)
	}
	if v := got["query"]["t"]; !strings.HasPrefix(v, "/////") {
		t.Errorf("t: got %.60q, want base64 Arrow", v)
	}
}

// TestRedisCLI talks to the door with redis-cli (Debian redis-tools):
// PING, XADD, HGETALL, KEYS, DEL, and an unknown command.
func TestRedisCLI(t *testing.T) {
	need(t, "redis-cli", "apt-get install redis-tools", "redis-cli", "--version")
	s := startDoor(t, respdoor.Config{}, nil, add)
	port := s.addr[strings.LastIndexByte(s.addr, ':')+1:]
	cli := func(args ...string) string {
		out, err := exec.Command("redis-cli", append([]string{"-p", port}, args...)...).CombinedOutput()
		if err != nil {
			t.Fatalf("redis-cli %q: %v\n%s", args, err, out)
		}
		return strings.TrimSpace(string(out))
	}
	if got := cli("PING"); got != "PONG" {
		t.Errorf("PING: got %q", got)
	}
	if got := cli("XADD", "add", "*", "uri", "cli", "data", `{"instances":[{"x":[1,2,3,4]}]}`, "serde", "stream"); !strings.Contains(got, "-") {
		t.Errorf("XADD: got %q, want an entry id", got)
	}
	meshtest.WaitFor(t, "the result", func() bool { return cli("KEYS", "cluster-serving_add:*") == "cluster-serving_add:cli" })
	if got := cli("HGETALL", "cluster-serving_add:cli"); !strings.HasPrefix(got, "value\n/////") {
		t.Errorf("HGETALL: got %.40q", got)
	}
	if got := cli("DEL", "cluster-serving_add:cli"); got != "1" {
		t.Errorf("DEL: got %q", got)
	}
	if got := cli("SET", "a", "b"); !strings.HasPrefix(got, "ERR unknown command 'SET' (cluster-serving RESP door: supported:") {
		t.Errorf("SET: got %q", got)
	}
}
