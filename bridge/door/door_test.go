package door_test

import (
	"errors"
	"testing"

	"github.com/cluster-serving/cluster-serving/infer/status"

	"github.com/cluster-serving/cluster-serving/bridge/door"
)

// catalog is a fixed door.Catalog.
type catalog struct {
	models []door.Model
	index  []door.ModelState
}

func (c catalog) Models() []door.Model               { return append([]door.Model(nil), c.models...) }
func (c catalog) Index(ready bool) []door.ModelState { return c.index }

func TestModelsDefaultsTheVersion(t *testing.T) {
	fixed := []door.Model{{Name: "fixed", Version: "1"}}
	if got := door.Models(nil, fixed); len(got) != 1 || got[0].Name != "fixed" {
		t.Errorf("no catalog: got %+v, want the fixed list", got)
	}
	got := door.Models(catalog{models: []door.Model{{Name: "a"}, {Name: "b", Version: "3"}}}, fixed)
	if len(got) != 2 || got[0].Version != "1" || got[1].Version != "3" {
		t.Errorf("catalog: got %+v, want a at version 1 and b at 3", got)
	}
}

func TestUnknownModelSaysWhy(t *testing.T) {
	c := catalog{index: []door.ModelState{{Name: "m", Version: "2", State: "UNAVAILABLE", Reason: "version 2 failed to load"}}}
	for _, tc := range []struct {
		name string
		c    door.Catalog
		want string
	}{
		{"m", c, `model "m" is not loaded (unavailable: version 2 failed to load)`},
		{"other", c, `unknown model "other"`},
		{"m", nil, `unknown model "m"`},
	} {
		err := door.UnknownModel(tc.c, tc.name)
		var we *status.Error
		if !errors.As(err, &we) || we.Status != status.NotFound || we.Message != tc.want {
			t.Errorf("UnknownModel(%s): got %v, want 404 %q", tc.name, err, tc.want)
		}
	}
}

// TestLookupHighestVersion: a request without a version goes to the
// highest version that serves, whatever order the catalog lists them in
// (the repository lists the model named jobName's latest version first).
func TestLookupHighestVersion(t *testing.T) {
	models := []door.Model{{Name: "m", Version: "10"}, {Name: "m", Version: "2"}, {Name: "m", Version: "9"}, {Name: "n", Version: "1"}}
	for _, version := range []string{"", "10"} {
		if m, err := door.Lookup(models, nil, "m", version); err != nil || m.Version != "10" {
			t.Errorf("Lookup(m, %q) = %v, %v; want version 10", version, m.Version, err)
		}
	}
	if m, err := door.Lookup(models, nil, "m", "2"); err != nil || m.Version != "2" {
		t.Errorf("Lookup(m, 2) = %v, %v", m.Version, err)
	}
	if _, err := door.Lookup(models, nil, "m", "3"); status.Of(err) != status.NotFound {
		t.Errorf("Lookup(m, 3) = %v, want 404", err)
	}
}
