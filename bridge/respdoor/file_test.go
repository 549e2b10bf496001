package respdoor_test

import (
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/cluster-serving/cluster-serving/bridge/respdoor"
	"github.com/cluster-serving/cluster-serving/mesh/serving"
)

// TestFileConfig maps config.yaml's resp keys onto the door's Config, and
// config.yaml refuses bad ones naming the key.
func TestFileConfig(t *testing.T) {
	f, err := serving.ParseFile([]byte("modelPath: m\njobName: j\nqueueReplicas: 3\nrespListen: 127.0.0.1:6380\nrespUser: u\nrespPasswordFile: /pw\n" +
		"respTlsCert: c\nrespTlsKey: k\nrespTlsClientCa: ca\nrespResultTTL: 60\nrespIdleTimeout: 1500\nrespMaxConnections: 7\n"))
	if err != nil {
		t.Fatal(err)
	}
	c := respdoor.FileConfig(f, f.ServedModels())
	got := []any{c.Addr, c.Jobs, c.User, c.PasswordFile, c.TLSCertFile, c.TLSKeyFile, c.TLSClientCAFile, c.ResultTTL, c.IdleTimeout, c.MaxConnections, c.Streams.Replicas}
	want := []any{"127.0.0.1:6380", []string{"j"}, "u", "/pw", "c", "k", "ca", time.Minute, 1500 * time.Millisecond, 7, 3}
	if fmt.Sprint(got) != fmt.Sprint(want) {
		t.Errorf("got %v, want %v", got, want)
	}
	for yaml, key := range map[string]string{
		"respListen: 6380\n":                      `config key "respListen"`,
		"respUser: u\n":                           `config key "respUser": needs respPasswordFile`,
		"respTlsKey: k\n":                         `config key "respTlsCert"`,
		"respTlsClientCa: ca\n":                   `config key "respTlsClientCa"`,
		"respIdleTimeout: -1\n":                   `config key "respIdleTimeout": -1 is negative`,
		"respListen: 127.0.0.1:1\nrespLisen: x\n": `config key "respLisen" (line 3): unknown key`,
	} {
		if _, err := serving.ParseFile([]byte("modelPath: m\n" + yaml)); err == nil || !strings.Contains(err.Error(), key) {
			t.Errorf("%q: got %v, want %s", yaml, err, key)
		}
	}
}
