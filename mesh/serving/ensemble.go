package serving

import (
	"cmp"
	"context"
	"fmt"
	"log/slog"
	"slices"
	"strings"
	"time"

	"google.golang.org/protobuf/proto"

	"github.com/cluster-serving/cluster-serving/infer/prepost"
	"github.com/cluster-serving/cluster-serving/infer/wire/kservepb"
	"github.com/cluster-serving/cluster-serving/mesh/pipeline"
)

// orderEntries puts every ensemble after the models its steps name, so
// that a repository loads the composing models (and nested ensembles)
// first. Ensembles that wait for each other get an Err that names the
// cycle, and load nothing.
func orderEntries(entries []RepoEntry) []RepoEntry {
	var out, ens []RepoEntry
	placed := map[string]bool{}
	isEns := map[string]bool{}
	for _, e := range entries {
		if e.Err == nil && pipeline.IsEnsemble(e.Config) {
			ens = append(ens, e)
			isEns[e.Name] = true
			continue
		}
		out = append(out, e)
		placed[e.Name] = true
	}
	for len(ens) > 0 {
		var rest []RepoEntry
		for _, e := range ens {
			if slices.ContainsFunc(pipeline.Steps(e.Config), func(dep string) bool { return isEns[dep] && !placed[dep] }) {
				rest = append(rest, e)
				continue
			}
			out = append(out, e)
			placed[e.Name] = true
		}
		if len(rest) == len(ens) {
			var names []string
			for _, e := range rest {
				names = append(names, e.Name)
			}
			for _, e := range rest {
				e.Err = fmt.Errorf("%w: %w %q: circular dependency between ensembles %v: each is a step of another", ErrModelConfig, pipeline.ErrEnsemble, e.Name, names)
				out = append(out, e)
			}
			break
		}
		ens = rest
	}
	return out
}

// member resolves a step's model for pipeline.Build: version -1 is the
// model's latest serving version (on the model's own job, which stays
// the same across version swaps); another version must serve.
func (r *Repository) member(name string, version int64) (pipeline.Member, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	m := r.models[name]
	switch {
	case m == nil:
		return pipeline.Member{}, fmt.Errorf("no model %q in the model repository", name)
	case m.state != StateReady || len(m.served) == 0:
		return pipeline.Member{}, fmt.Errorf("model %q is %s: %s", name, m.state, cmp.Or(m.reason, "not loaded"))
	}
	v := version
	if v <= 0 { // -1, or unset: the latest

		v = m.highest()
	}
	rv := m.served[v]
	if rv == nil {
		var serving []int64
		for k := range m.served {
			serving = append(serving, k)
		}
		slices.Sort(serving)
		return pipeline.Member{}, fmt.Errorf("version %d of model %q does not serve (serving: %v)", version, name, serving)
	}
	return pipeline.Member{Name: name, Version: rv.model.Version, Job: rv.model.Job, Config: rv.model.Config}, nil
}

// membersStamp identifies what an ensemble's steps resolve to now (model,
// version, job), so that a poll rebuilds an ensemble whose composing
// models changed versions.
func (r *Repository) membersStamp(cfg *kservepb.ModelConfig) string {
	var b strings.Builder
	for _, s := range cfg.GetEnsembleScheduling().GetStep() {
		m, err := r.member(s.ModelName, s.ModelVersion)
		if err != nil {
			fmt.Fprintf(&b, " %s@%d:%v", s.ModelName, s.ModelVersion, err)
			continue
		}
		fmt.Fprintf(&b, " %s@%s:%s", m.Name, m.Version, m.Job)
	}
	return b.String()
}

// loadEnsemble builds ensemble model (configured by raw) against the
// repository's models: a Unit on a serving node, else its description.
func (r *Repository) loadEnsemble(model Model, raw *kservepb.ModelConfig) (*Unit, Model, error) {
	began := time.Now()
	g, err := pipeline.Build(model.Name, raw, r.member)
	if err != nil {
		return nil, model, fmt.Errorf("%w: %w", ErrModelConfig, err)
	}
	model.Info, model.Config = g.Info(), ensembleConfig(model.Name, raw)
	if !r.node.cfg.Serve || !r.cfg.serves(model.Name) {
		return nil, model, nil
	}
	ucfg := r.node.cfg.unit(model)
	ucfg.ModelConfig = raw
	u, err := newEnsembleUnit(ucfg, g)
	if err != nil {
		return nil, model, err
	}
	var steps []string
	for _, m := range g.Members() {
		steps = append(steps, m.Name+"@"+m.Version+"->"+m.Job)
	}
	cmp.Or(ucfg.Logger, slog.Default()).Info("ensemble loaded", "name", model.Name, "version", model.Version, "job", model.Job,
		"inputs", FormatIO(model.Info.Inputs), "outputs", FormatIO(model.Info.Outputs), "steps", strings.Join(steps, " "),
		"took", time.Since(began).Round(time.Millisecond))
	return u, u.Model(), nil
}

// ensembleConfig is the config an ensemble answers at
// /v2/models/{m}/config: as written, with its name and Triton's defaults.
func ensembleConfig(name string, raw *kservepb.ModelConfig) *kservepb.ModelConfig {
	c := proto.Clone(raw).(*kservepb.ModelConfig)
	c.Name = name
	if c.VersionPolicy == nil {
		c.VersionPolicy = &kservepb.ModelVersionPolicy{PolicyChoice: &kservepb.ModelVersionPolicy_Latest_{Latest: &kservepb.ModelVersionPolicy_Latest{NumVersions: 1}}}
	}
	for _, s := range c.GetEnsembleScheduling().GetStep() {
		if s.ModelVersion == 0 {
			s.ModelVersion = -1
		}
	}
	return c
}

// dependents lists the READY ensembles with a step on model name, by
// name.
func (r *Repository) dependents(name string) []string {
	var out []string
	for _, m := range r.Models() {
		if pipeline.IsEnsemble(m.Config) && slices.Contains(pipeline.Steps(m.Config), name) && !slices.Contains(out, m.Name) {
			out = append(out, m.Name)
		}
	}
	slices.Sort(out)
	return out
}

// unloadDependents unloads the ensembles with a step on model name, which
// stopped serving: their requests would wait for a step nobody runs. A
// load of name (or the next poll) brings them back.
func (r *Repository) unloadDependents(name string) {
	for _, e := range r.dependents(name) {
		_ = r.unload(e, fmt.Sprintf("a step's model %q does not serve: load it, then this ensemble", name), false)
		r.unloadDependents(e) // nested ensembles
	}
}

// reloadDependents loads again the ensembles among entries (the
// repository as just scanned) with a step on model name, directly or
// through another ensemble, after name loaded: those unloaded with it
// come back, and those that serve pick its new versions up. Ordered
// entries put each ensemble after those it uses, so one pass suffices.
func (r *Repository) reloadDependents(ctx context.Context, entries []RepoEntry, name string) {
	changed := map[string]bool{name: true}
	for _, e := range orderEntries(entries) {
		if e.Err != nil || !pipeline.IsEnsemble(e.Config) || !slices.ContainsFunc(pipeline.Steps(e.Config), func(s string) bool { return changed[s] }) {
			continue
		}
		_ = r.apply(ctx, e, false) // logged and in the index
		changed[e.Name] = true
	}
}

// loadStep loads a built-in pre- or post-processing step (backend
// cluster_serving, see infer/prepost): a Unit whose worker runs it on a
// serving node, else its description.
func (r *Repository) loadStep(model Model, raw *kservepb.ModelConfig) (*Unit, Model, error) {
	cfg := proto.Clone(raw).(*kservepb.ModelConfig)
	cfg.Name = model.Name
	s, err := prepost.New(cfg)
	if err != nil {
		return nil, model, fmt.Errorf("%w: model %q: %w", ErrModelConfig, model.Name, err)
	}
	model.Info, model.Config = s.Info(), s.Config()
	if !r.node.cfg.Serve || !r.cfg.serves(model.Name) {
		return nil, model, nil
	}
	ucfg := r.node.cfg.unit(model)
	if err := ucfg.Validate(); err != nil {
		return nil, model, err
	}
	ucfg.Logger = cmp.Or(ucfg.Logger, slog.Default())
	ucfg.Logger.Info("step loaded", "name", model.Name, "version", model.Version, "job", model.Job,
		"inputs", FormatIO(model.Info.Inputs), "outputs", FormatIO(model.Info.Outputs), "backend", prepost.Backend)
	return &Unit{cfg: ucfg, step: s}, model, nil
}
