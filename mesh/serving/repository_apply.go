package serving

import (
	"context"
	"errors"
	"fmt"
	"path/filepath"
	"strconv"
	"time"

	"github.com/cluster-serving/cluster-serving/infer/prepost"
	"github.com/cluster-serving/cluster-serving/infer/wire/kservepb"
	"github.com/cluster-serving/cluster-serving/mesh/pipeline"
)

// apply brings model e to the versions its version_policy picks (see
// bring), then retires the versions that no longer serve, once at least
// one picked version serves: when none loads, the old ones keep serving.
// explicit (the load API) reloads even the versions that serve and
// loads a model that was unloaded; a poll loads only what changed and
// does not retry a version that failed until its file changes. ctx is
// Run's (Background before Run: the units' workers start with Run).
func (r *Repository) apply(ctx context.Context, e RepoEntry, explicit bool) error {
	m := r.record(e.Name)
	r.mu.Lock()
	m.found = e.Version
	unloaded, failedAt := m.unloaded, m.failedAt[0]
	r.mu.Unlock()
	if !explicit && unloaded {
		return nil
	}
	if e.Err != nil {
		r.failed(m, e.Version, e.Err, explicit || failedAt != e.Err.Error())
		r.set(func() { m.failedAt[0] = e.Err.Error() })
		return e.Err
	}
	r.set(func() { delete(m.failedAt, 0) })
	next := map[int64]*repoVersion{}
	var errs []error
	tried := false
	for i := len(e.Versions) - 1; i >= 0; i-- {
		v, loaded, err := r.bring(ctx, m, e, e.Versions[i], len(next) == 0, explicit)
		tried = tried || loaded
		if err != nil {
			errs = append(errs, err)
			continue
		}
		next[v.version] = v
	}
	if tried {
		for _, w := range e.Warnings {
			r.log.Warn("model repository: config.pbtxt", "name", e.Name, "warning", w)
		}
	}
	if len(next) == 0 {
		return errors.Join(errs...)
	}
	r.swap(m, e, next)
	return errors.Join(errs...)
}

// bring returns version rv of model e serving on its job (latest: the
// model's own, else a versioned one, see job): the unit that serves it
// there already, unless explicit or config.pbtxt changed, or a unit
// loaded now. loaded reports whether it tried to load one.
func (r *Repository) bring(ctx context.Context, m *repoModel, e RepoEntry, rv RepoVersion, latest, explicit bool) (v *repoVersion, loaded bool, err error) {
	job := r.job(m.name, rv.Version, latest)
	cfgStamp := fileStamp(filepath.Join(r.cfg.Dir, e.Name, "config.pbtxt"))
	if pipeline.IsEnsemble(e.Config) {
		cfgStamp += r.membersStamp(e.Config) // rebuilt when a step's model changes versions
	}
	r.mu.Lock()
	cur, failedAt, anyServes := m.served[rv.Version], m.failedAt[rv.Version], len(m.served) > 0
	r.mu.Unlock()
	if !explicit && cur != nil && cur.model.Job == job && cur.stamp == cfgStamp {
		return cur, false, nil
	}
	if rv.Err != nil {
		r.failed(m, rv.Version, rv.Err, explicit || failedAt != rv.Err.Error())
		r.set(func() { m.failedAt[rv.Version] = rv.Err.Error() })
		return nil, false, rv.Err
	}
	stamp := fileStamp(rv.Path) + " " + cfgStamp
	if !explicit && stamp == failedAt {
		r.mu.Lock()
		defer r.mu.Unlock()
		return nil, false, errors.New(m.failed[rv.Version])
	}
	if !anyServes {
		r.set(func() { m.state, m.reason = StateLoading, "" })
	}
	model := Model{Name: m.name, Version: strconv.FormatInt(rv.Version, 10), Path: rv.Path, Job: job}
	if v, err = r.start(ctx, model, e.Config); err != nil {
		r.set(func() { m.failedAt[rv.Version] = stamp })
		r.failed(m, rv.Version, err, true)
		return nil, true, err
	}
	v.version, v.stamp = rv.Version, cfgStamp
	r.set(func() { delete(m.failed, rv.Version); delete(m.failedAt, rv.Version) })
	return v, true, nil
}

// start loads model (configured by raw, its config.pbtxt; nil: none) and,
// once Run runs, ensures its job's streams and starts its worker, waiting
// until it pulls records.
func (r *Repository) start(ctx context.Context, model Model, raw *kservepb.ModelConfig) (*repoVersion, error) {
	v := &repoVersion{}
	var err error
	if v.unit, v.model, err = r.load(model, raw); err != nil {
		return nil, err
	}
	if r.nc != nil {
		err = r.node.ensureStreams(ctx, model.Job)
	}
	if err == nil && v.unit != nil && r.nc != nil {
		v.stop, v.done = r.runUnit(ctx, v.unit)
		if err = waitUnit(ctx, v.unit, v.done); err != nil {
			v.stop()
			<-v.done
		}
	}
	if err != nil {
		if v.unit != nil {
			_ = v.unit.Close()
		}
		return nil, err
	}
	return v, nil
}

// swap makes next m's serving versions and retires the units that no
// longer serve.
func (r *Repository) swap(m *repoModel, e RepoEntry, next map[int64]*repoVersion) {
	var old, fresh []*repoVersion
	picked := map[int64]bool{}
	for _, v := range e.Versions {
		picked[v.Version] = true
	}
	r.set(func() {
		for _, v := range m.served {
			if next[v.version] != v {
				old = append(old, v)
			}
		}
		for _, v := range next {
			if m.served[v.version] != v {
				fresh = append(fresh, v)
			}
		}
		m.state, m.served, m.unloaded, m.reason = StateReady, next, false, ""
		for k := range m.failed {
			if !picked[k] {
				delete(m.failed, k)
			}
		}
		for k, why := range m.failed {
			m.reason = fmt.Sprintf("version %d failed to load, version %d serves: %s", k, m.highest(), why)
		}
	})
	for _, v := range fresh {
		r.log.Info("model repository: version serves", "name", e.Name, "version", v.version, "job", v.model.Job, "path", v.model.Path)
	}
	for _, v := range old {
		r.retire(m.name, v)
	}
}

// load loads model: a Unit on a serving node, else its description.
func (r *Repository) load(model Model, raw *kservepb.ModelConfig) (*Unit, Model, error) {
	if pipeline.IsEnsemble(raw) {
		return r.loadEnsemble(model, raw)
	}
	if prepost.Is(raw) {
		return r.loadStep(model, raw)
	}
	if !r.node.cfg.Serve || !r.cfg.serves(model.Name) {
		model, err := describeModel(model, raw, r.node.cfg.Unit.Engine)
		return nil, model, err
	}
	ucfg := r.node.cfg.unit(model)
	ucfg.ModelConfig = raw
	u, err := NewUnit(ucfg)
	if err != nil {
		return nil, Model{}, err
	}
	return u, u.Model(), nil
}

// waitUnit waits until u's worker pulls records and shows in discovery,
// or its Run returned.
func waitUnit(ctx context.Context, u *Unit, done chan struct{}) error {
	for !u.consuming() {
		select {
		case <-done:
			return fmt.Errorf("model %s version %s: its worker did not start", u.Model().Name, u.Model().Version)
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(5 * time.Millisecond):
		}
	}
	return nil
}

// retire drains the worker of a version of model name that no longer
// serves and closes its engine.
func (r *Repository) retire(name string, old *repoVersion) {
	if old.stop != nil {
		old.stop()
		<-old.done
	}
	if old.unit != nil {
		if err := old.unit.Close(); err != nil {
			r.log.Warn("model repository: close the old version", "name", name, "version", old.version, "err", err)
		}
	}
}

// failed records that version of m did not load; log says whether to log
// it (a poll logs a failure once, not at every poll).
func (r *Repository) failed(m *repoModel, version int64, err error, log bool) {
	var serving int64
	r.set(func() {
		serving = m.highest()
		if version > 0 {
			m.failed[version] = err.Error()
		}
		switch {
		case serving > 0 && version == 0:
			m.reason = fmt.Sprintf("the model failed to load, version %d serves: %v", serving, err)
			return
		case serving > 0:
			m.reason = fmt.Sprintf("version %d failed to load, version %d serves: %v", version, serving, err)
			return
		}
		m.state, m.reason = StateUnavailable, err.Error()
	})
	if !log {
		return
	}
	if serving > 0 {
		r.log.Warn("model repository: new version failed to load; the old one keeps serving", "name", m.name, "version", version,
			"serving", serving, "err", err)
		return
	}
	r.log.Warn("model repository: model failed to load", "name", m.name, "version", version, "err", err)
}
