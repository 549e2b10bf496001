package serving_test

import (
	"context"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/cluster-serving/cluster-serving/bridge/door"
	"github.com/cluster-serving/cluster-serving/infer/wire"
	"github.com/cluster-serving/cluster-serving/infer/wire/kservepb"
	"github.com/cluster-serving/cluster-serving/mesh"
	"github.com/cluster-serving/cluster-serving/mesh/serving"
)

// TestResponseCacheKeys checks the config.yaml keys of the response
// cache: the top-level switch for the models without a config.pbtxt,
// each models entry's own, the bucket's bounds and their checks, and the
// template's numbers, which must be mesh's defaults.
func TestResponseCacheKeys(t *testing.T) {
	f := parseFile(t, []byte("models:\n  - {name: a, path: m}\n  - {name: b, path: m, responseCache: false}\n"+
		"  - {name: c, path: m, responseCache: true}\nresponseCache: true\nresponseCacheMaxBytes: 1048576\nresponseCacheTTL: 60\n"))
	var got []bool
	for _, m := range f.ServedModels() {
		got = append(got, m.ResponseCache)
	}
	if want := []bool{true, false, true}; !slices.Equal(got, want) {
		t.Errorf("models' responseCache: got %v, want %v", got, want)
	}
	if c := f.CacheConfig(); c.MaxBytes != 1<<20 || c.TTL != time.Minute {
		t.Errorf("CacheConfig: got %+v, want 1 MiB and 1m", c)
	}
	if !parseFile(t, []byte("modelPath: m\nresponseCache: true\n")).ServedModels()[0].ResponseCache {
		t.Error("responseCache: true leaves modelPath's model without the cache")
	}
	tmpl := parseFile(t, serving.Template("m"))
	if c := tmpl.CacheConfig(); c.MaxBytes != mesh.DefaultCacheMaxBytes || c.TTL != mesh.DefaultCacheTTL || tmpl.ResponseCache {
		t.Errorf("template: says %+v, cache %v; the defaults are %d, %v, off", c, tmpl.ResponseCache, mesh.DefaultCacheMaxBytes, mesh.DefaultCacheTTL)
	}
	for _, tt := range []struct{ yaml, want string }{
		{"modelPath: m\nresponseCacheMaxBytes: -1\n", `config key "responseCacheMaxBytes": -1 is negative`},
		{"modelPath: m\nresponseCacheTTL: -5\n", `config key "responseCacheTTL": -5 is negative`},
		{"models:\n  - {name: a, path: m, responseCache: maybe}\n", `responseCache: want true or false, got "maybe"`},
	} {
		if _, err := serving.ParseFile([]byte(tt.yaml)); err == nil || !strings.Contains(err.Error(), tt.want) {
			t.Errorf("%q: got %v, want an error holding %s", tt.yaml, err, tt.want)
		}
	}
}

// parseFile is config.yaml data parsed, failing the test when it does
// not parse.
func parseFile(tb testing.TB, data []byte) *serving.File {
	tb.Helper()
	f, err := serving.ParseFile(data)
	if err != nil {
		tb.Fatal(err)
	}
	return f
}

// TestServedConfig checks that config.yaml's responseCache shows in the
// config the doors answer and act on, as a config.pbtxt's does, on a
// copy.
func TestServedConfig(t *testing.T) {
	own := &kservepb.ModelConfig{Name: "m"}
	m := serving.Model{Name: "m", Config: own, ResponseCache: true}
	if !m.CacheEnabled() || !m.ServedConfig().GetResponseCache().GetEnable() || own.ResponseCache != nil {
		t.Errorf("responseCache: enabled %v, served config %v, own config changed %v", m.CacheEnabled(), m.ServedConfig(), own.ResponseCache != nil)
	}
	pbtxt := serving.Model{Name: "m", Config: &kservepb.ModelConfig{ResponseCache: &kservepb.ModelResponseCache{Enable: true}}}
	off := serving.Model{Name: "m", Config: own}
	if !pbtxt.CacheEnabled() || off.CacheEnabled() || off.ServedConfig() != own {
		t.Errorf("config.pbtxt's response_cache: got enabled %v; a model without: enabled %v", pbtxt.CacheEnabled(), off.CacheEnabled())
	}
}

// TestNodeResponseCache runs a node serving add_f32 with responseCache
// and checks, through a door's inference step (door.Config.Submit) with
// the node's ResponseCache, that the unit's worker stores what it runs
// and the second request is a hit.
func TestNodeResponseCache(t *testing.T) {
	cfg := addConfig(t, "add", "")
	cfg.Serve = true
	cfg.Models[0].ResponseCache = true
	n := runReady(t, cfg)
	m := n.Models()[0]
	dc := door.Config{Cache: n.ResponseCache(mesh.CacheConfig{}),
		Models: []door.Model{{Name: m.Name, Version: m.Version, Job: m.Job, Info: m.Info, Config: m.ServedConfig()}}}
	body := []byte(`{"inputs":[{"name":"x","datatype":"FP32","shape":[1,4],"data":[1,2,3,4]}]}`)
	for i, want := range []uint64{0, 1} {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		res, err := dc.Submit(ctx, n.Client(), dc.Models[0], mesh.Request{ContentType: wire.MediaTypeOIP, Body: body})
		cancel()
		if err != nil || !strings.Contains(string(res.Body), `"data":[3,5,7,9]`) {
			t.Fatalf("request %d: got %s, %v", i, res.Body, err)
		}
		if got := dc.Cache.(*mesh.Cache).Counts()["add"].CacheHit.Count; got != want {
			t.Errorf("after request %d: %d hits, want %d", i, got, want)
		}
	}
}
