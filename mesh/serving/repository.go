package serving

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/cluster-serving/cluster-serving/infer/status"
	"github.com/cluster-serving/cluster-serving/mesh"

	"github.com/nats-io/nats.go"
)

// Model states of the repository index, Triton's names.
const (
	StateReady       = "READY"
	StateUnavailable = "UNAVAILABLE"
	StateLoading     = "LOADING"
	StateUnloading   = "UNLOADING"
)

// DefaultRepositoryPoll is how often a node looks for new versions and
// models in its repository when the config does not say (modelRepositoryPoll).
const DefaultRepositoryPoll = 10 * time.Second

// Model control modes of a repository (config key modelControl), Triton's
// names (tritonserver --model-control-mode).
const (
	// ControlPoll: every model of the directory loads at start, and the
	// node rescans it every Poll; Load and Unload are refused.
	ControlPoll = "poll"
	// ControlExplicit: every model of the directory loads at start (as
	// Triton's --load-model=*); then only Load and Unload change what
	// serves. No polling.
	ControlExplicit = "explicit"
	// ControlNone: the models loaded at start serve until the node stops;
	// no polling, Load and Unload are refused.
	ControlNone = "none"
)

// RepositoryConfig configures the model repository of a Node: a directory
// with one sub-directory per model and numeric version directories inside
// (see ScanRepository), and an optional Triton config.pbtxt per model
// that configures it (see withSettings). The highest version of each
// model serves, or the versions its config.pbtxt's version_policy picks.
type RepositoryConfig struct {
	// Dir is the repository directory. Empty: no repository (the node
	// serves Config.Models).
	Dir string
	// Poll is how often the node rescans Dir and loads new versions and
	// new models (and unloads models whose directory went), with Control
	// ControlPoll; 0 there means DefaultRepositoryPoll. Set only with
	// ControlPoll (or an empty Control).
	Poll time.Duration
	// Control is the model control mode: ControlPoll, ControlExplicit or
	// ControlNone. Empty: ControlPoll when Poll > 0, else ControlExplicit
	// (the node's behaviour before modes existed).
	Control string
	// Serve names the models this node runs workers for; empty: all.
	// The others it only describes (Config.Serve false for them): their
	// workers run in other processes (serveModels).
	Serve []string
	// Job is the job name of the deployment (jobName): the model named
	// Job serves on the job Job itself (the Redis door, POST /predict and
	// serving.<Job>.predict reach it); every other model on <Job>-<name>.
	Job string
}

// control returns the mode in force (see Control).
func (c RepositoryConfig) control() string {
	switch {
	case c.Control != "":
		return c.Control
	case c.Poll > 0:
		return ControlPoll
	}
	return ControlExplicit
}

// serves reports whether the node runs the workers of model name.
func (c RepositoryConfig) serves(name string) bool {
	return len(c.Serve) == 0 || slices.Contains(c.Serve, name)
}

// poll returns how often to rescan Dir; 0: never.
func (c RepositoryConfig) poll() time.Duration {
	if c.control() != ControlPoll {
		return 0
	}
	return cmp.Or(c.Poll, DefaultRepositoryPoll)
}

// validate reports a bad Control, or a Poll set without ControlPoll.
func (c RepositoryConfig) validate() error {
	switch c.control() {
	case ControlPoll, ControlExplicit, ControlNone:
	default:
		return fmt.Errorf("%w: Repository.Control: %q: want %s, %s or %s", ErrInvalidConfig, c.Control, ControlPoll, ControlExplicit, ControlNone)
	}
	if c.Poll < 0 || (c.Poll > 0 && c.control() != ControlPoll) {
		return fmt.Errorf("%w: Repository.Poll: %v: set only with Control %s, and not negative", ErrInvalidConfig, c.Poll, ControlPoll)
	}
	return nil
}

// IndexEntry is one model version of the repository index: Name, and
// Version a version that serves (READY), or one its version_policy picks
// that does not (UNAVAILABLE); for a model no version of which serves,
// the highest found on disk ("" when none). State is StateReady,
// StateUnavailable, StateLoading or StateUnloading; Reason says why a
// model is not ready, or why a newer version does not serve while an
// older one does. The status page shows the same (mesh.ModelState).
type IndexEntry = mesh.ModelState

// repoModel is the repository's record of one model. Guarded by
// Repository.mu; its versions' units and workers' lives are the Run
// loop's.
type repoModel struct {
	name, state, reason string
	found               int64                  // highest version picked at the last scan
	served              map[int64]*repoVersion // the versions that serve (READY)
	failed              map[int64]string       // picked versions that do not serve: why
	unloaded            bool                   // explicitly unloaded: polling leaves it alone
	// failedAt holds, per version, "<path> <size> <mtime>" of the model
	// file (and config.pbtxt) that last failed; 0 a model-level error.
	failedAt map[int64]string
}

// repoVersion is one serving version of a model.
type repoVersion struct {
	version int64
	model   Model // with its Info and completed Config
	unit    *Unit // nil on a node that only describes models
	stop    context.CancelFunc
	done    chan struct{}
	stamp   string // config.pbtxt's fileStamp when it loaded
}

// highest is the highest serving version of m; 0: none.
func (m *repoModel) highest() int64 {
	var v int64
	for k := range m.served {
		v = max(v, k)
	}
	return v
}

// repoOp is a load or unload the Run loop carries out.
type repoOp struct {
	name   string
	unload bool
	reply  chan error
}

// Repository serves the models of a model repository and swaps versions
// without dropping a request: a new version loads and warms up, its
// worker joins the job's consumer beside the old one, and only then the
// old worker drains (records it pulled but did not start go back to the
// queue for the new one; those it runs finish). A version that fails to
// load leaves the serving one in place, with the reason in the index and
// the log.
//
// The Node builds it (NewNode loads every model once), runs it (Run) and
// closes it. Its methods are safe for concurrent use.
type Repository struct {
	cfg    RepositoryConfig
	node   *Node
	log    *slog.Logger
	ops    chan repoOp
	ended  chan struct{} // closed when Run returns
	mu     sync.Mutex
	models map[string]*repoModel
	// nc is the connection Run's workers use; set by Run.
	nc *nats.Conn
}

// newRepository scans dir and loads every model it can; it fails when
// dir cannot be read or when no model loads, so that a start with a
// wrong path stops at once.
func newRepository(n *Node, cfg RepositoryConfig) (*Repository, error) {
	r := &Repository{cfg: cfg, node: n, log: n.log, ops: make(chan repoOp), ended: make(chan struct{}), models: map[string]*repoModel{}}
	entries, err := ScanRepository(cfg.Dir)
	if err != nil {
		return nil, err
	}
	var errs []error
	for _, e := range orderEntries(entries) {
		if err := r.apply(context.Background(), e, false); err != nil {
			errs = append(errs, err)
		}
	}
	models := r.Models()
	if len(models) == 0 {
		errs = append([]error{fmt.Errorf("model repository %q: no model loads", cfg.Dir)}, errs...)
		r.Close()
		return nil, errors.Join(errs...)
	}
	if models[0].Job != cfg.Job {
		r.log.Warn("model repository: no model is named like jobName, so nothing serves the job itself: the Redis door's requests "+
			"wait unanswered and serving.<jobName>.predict has no responder; POST /predict goes to the first model by name", "jobName", cfg.Job, "first", models[0].Name)
	}
	return r, nil
}

// job is the job of version v of model name: the highest serving
// version (latest) is on the model's job (jobName for the model named
// like it, <jobName>-<name> for the others), so that a new version's
// worker joins its consumer beside the old one's; any other version on
// <jobName>-<name>-v<version>, as a models entry's (File.ServedModels).
func (r *Repository) job(name string, v int64, latest bool) string {
	switch {
	case !latest:
		return r.cfg.Job + "-" + name + "-v" + strconv.FormatInt(v, 10)
	case name == r.cfg.Job:
		return name
	}
	return r.cfg.Job + "-" + name
}

// Models lists the model versions that serve now: the one on the job
// itself (the default model's latest) first, then by name and version,
// ascending, so that a door's request without a version (door.Lookup
// takes the last listed) reaches a model's latest; but for the default
// model's older versions, listed after its latest.
func (r *Repository) Models() []Model {
	r.mu.Lock()
	defer r.mu.Unlock()
	var out []Model
	for _, m := range r.models {
		if m.state != StateReady {
			continue
		}
		for _, v := range m.served {
			out = append(out, v.model)
		}
	}
	slices.SortFunc(out, func(a, b Model) int {
		if (a.Job == r.cfg.Job) != (b.Job == r.cfg.Job) {
			if a.Job == r.cfg.Job {
				return -1
			}
			return 1
		}
		return cmp.Or(strings.Compare(a.Name, b.Name), compareVersions(a.Version, b.Version))
	})
	return out
}

// compareVersions orders decimal versions by value.
func compareVersions(a, b string) int {
	return cmp.Or(cmp.Compare(len(a), len(b)), strings.Compare(a, b))
}

// units lists the serving units.
func (r *Repository) units() []*Unit {
	r.mu.Lock()
	defer r.mu.Unlock()
	var out []*Unit
	for _, m := range r.models {
		for _, v := range m.served {
			if v.unit != nil {
				out = append(out, v.unit)
			}
		}
	}
	return out
}

// Index lists every model of the repository by name, loaded or not (the
// directory is read again, so a model added while polling is off shows
// as UNAVAILABLE until loaded); with ready, only the READY ones.
func (r *Repository) Index(ready bool) []IndexEntry {
	entries, _ := ScanRepository(r.cfg.Dir)
	r.mu.Lock()
	defer r.mu.Unlock()
	seen := map[string]bool{}
	var out []IndexEntry
	for name, m := range r.models {
		seen[name] = true
		out = append(out, m.index()...)
	}
	for _, e := range entries {
		if seen[e.Name] {
			continue
		}
		ie := IndexEntry{Name: e.Name, State: StateUnavailable, Reason: r.notLoaded(e.Name)}
		if e.Version > 0 {
			ie.Version = strconv.FormatInt(e.Version, 10)
		}
		if e.Err != nil {
			ie.Reason = e.Err.Error()
		}
		out = append(out, ie)
	}
	if ready {
		out = slices.DeleteFunc(out, func(e IndexEntry) bool { return e.State != StateReady })
	}
	slices.SortFunc(out, func(a, b IndexEntry) int {
		return cmp.Or(strings.Compare(a.Name, b.Name), compareVersions(a.Version, b.Version))
	})
	return out
}

// index lists m's entries: one per serving version (the highest carries
// the model's reason) and one per picked version that does not serve;
// a model no version of which serves is one entry, its highest version.
func (m *repoModel) index() []IndexEntry {
	if m.state != StateReady {
		e := IndexEntry{Name: m.name, State: m.state, Reason: m.reason}
		if m.found > 0 {
			e.Version = strconv.FormatInt(m.found, 10)
		}
		return []IndexEntry{e}
	}
	var out []IndexEntry
	top := m.highest()
	for v := range m.served {
		e := IndexEntry{Name: m.name, Version: strconv.FormatInt(v, 10), State: StateReady}
		if v == top {
			e.Reason = m.reason
		}
		out = append(out, e)
	}
	for v, why := range m.failed {
		if m.served[v] == nil {
			out = append(out, IndexEntry{Name: m.name, Version: strconv.FormatInt(v, 10), State: StateUnavailable, Reason: why})
		}
	}
	return out
}

// notLoaded is the index's reason for a model on disk the node never
// loaded (added after start, or since the last poll).
func (r *Repository) notLoaded(name string) string {
	switch r.cfg.control() {
	case ControlPoll:
		return "not loaded yet: the next poll of the model repository loads it"
	case ControlNone:
		return "not loaded: with modelControl none, only the models present at start serve"
	}
	return "not loaded yet: POST /v2/repository/models/" + name + "/load"
}

// statusForbidden is the status of a load or unload that the model control
// mode refuses (HTTP's 403).
const statusForbidden = 403

// controlRefused is the *status.Error of a load or unload outside
// ControlExplicit, nil in it. Triton refuses them too outside its
// EXPLICIT mode ("explicit model load / unload is not allowed if polling
// is enabled", in POLL as in NONE): in poll mode the directory is the one
// source of truth, and an API that also loads and unloads would fight the
// poll (a model unloaded by hand that the directory still holds, a
// version loaded that the next scan judges again), with the directory's
// file permissions, not a network token, guarding what serves. Triton
// answers 503 (UNAVAILABLE); this answers 403, since retrying cannot
// help until the node's config changes.
func (r *Repository) controlRefused(what string) error {
	switch mode := r.cfg.control(); mode {
	case ControlPoll:
		return status.Errorf(statusForbidden, "explicit model %s is not allowed with modelControl poll: the node loads and unloads what the model repository directory holds; set modelControl: explicit to use this API", what)
	case ControlNone:
		return status.Errorf(statusForbidden, "explicit model %s is not allowed with modelControl none: the models loaded at start serve until the node stops; set modelControl: explicit to use this API", what)
	}
	return nil
}

// Load loads (or reloads) the versions of model name its version_policy
// picks (the highest by default) from the repository, re-reading its
// config.pbtxt, waits until they serve and returns nil; the serving
// versions, if any, keep serving until then, and keep serving when no
// picked version loads. A model not in the repository is a *status.Error 404, one that
// fails to load a *status.Error 400 with the reason; ErrRepositoryStopped
// when the node does not run. Outside ControlExplicit it is a
// *status.Error 403 (see controlRefused).
func (r *Repository) Load(ctx context.Context, name string) error {
	return r.do(ctx, repoOp{name: name})
}

// Unload stops serving model name: the door stops routing to it at once,
// its worker drains (requests it runs finish) and its engine closes.
// Polling leaves it unloaded until Load. A model that does not serve is a
// *status.Error 404; outside ControlExplicit, one of 403.
func (r *Repository) Unload(ctx context.Context, name string) error {
	return r.do(ctx, repoOp{name: name, unload: true})
}

// ErrRepositoryStopped is returned by Load and Unload when the node is
// not running (before Run or after it returned).
var ErrRepositoryStopped = errors.New("serving: model repository is not running")

func (r *Repository) do(ctx context.Context, op repoOp) error {
	what := "load"
	if op.unload {
		what = "unload"
	}
	if err := r.controlRefused(what); err != nil {
		return err
	}
	op.reply = make(chan error, 1)
	select {
	case r.ops <- op:
	case <-r.ended:
		return ErrRepositoryStopped
	case <-ctx.Done():
		return ctx.Err()
	}
	select {
	case err := <-op.reply:
		return err
	case <-ctx.Done():
		return ctx.Err() // the op still completes in the Run loop
	}
}

// Run starts the workers of the loaded models, then carries out loads,
// unloads and polls until ctx ends; then it drains every worker (see
// Unit.Run) and returns. A worker that cannot start stops Run with its
// error, as for a node's static units.
func (r *Repository) Run(ctx context.Context, nc *nats.Conn) error {
	r.mu.Lock()
	r.nc = nc
	var start []*repoVersion
	for _, m := range r.models {
		for _, v := range m.served {
			if v.unit != nil && v.stop == nil {
				start = append(start, v)
			}
		}
	}
	r.mu.Unlock()
	defer close(r.ended)
	for _, v := range start {
		stop, done := r.runUnit(ctx, v.unit)
		r.set(func() { v.stop, v.done = stop, done })
	}
	defer r.stopAll()
	var tick <-chan time.Time
	if poll := r.cfg.poll(); poll > 0 {
		t := time.NewTicker(poll)
		defer t.Stop()
		tick = t.C
	}
	for {
		select {
		case <-ctx.Done():
			return nil
		case op := <-r.ops:
			op.reply <- r.run(ctx, op)
		case <-tick:
			r.poll(ctx)
		}
	}
}

// runUnit runs u's worker until the returned cancel is called; done
// closes once Run returned.
func (r *Repository) runUnit(ctx context.Context, u *Unit) (context.CancelFunc, chan struct{}) {
	uctx, cancel := context.WithCancel(ctx)
	done := make(chan struct{})
	go func() {
		defer close(done)
		if err := u.Run(uctx, r.nc); err != nil {
			r.log.Error("model repository: worker stopped", "name", u.Model().Name, "version", u.Model().Version, "err", err)
		}
	}()
	return cancel, done
}

// stopAll drains every worker once Run's ctx ended (their ctx ended with
// it) and waits for them.
func (r *Repository) stopAll() {
	r.mu.Lock()
	var dones []chan struct{}
	for _, m := range r.models {
		for _, v := range m.served {
			if v.done != nil {
				dones = append(dones, v.done)
			}
		}
	}
	r.mu.Unlock()
	for _, d := range dones {
		<-d
	}
}

// run carries out op in the Run loop.
func (r *Repository) run(ctx context.Context, op repoOp) error {
	if op.unload {
		err := r.unload(op.name, "unloaded (POST /v2/repository/models/"+op.name+"/unload)", true)
		if err == nil {
			r.unloadDependents(op.name)
		}
		return err
	}
	entries, err := ScanRepository(r.cfg.Dir)
	if err != nil {
		return status.Errorf(status.BadInput, "%v", err)
	}
	for _, e := range entries {
		if e.Name == op.name {
			err := r.apply(ctx, e, true)
			r.reloadDependents(ctx, entries, op.name)
			if err != nil {
				return status.Errorf(status.BadInput, "load model %q: %v", op.name, err)
			}
			return nil
		}
	}
	return status.Errorf(status.NotFound, "unknown model %q: no such directory in the model repository", op.name)
}

// poll rescans the repository: new models and new versions load; models
// whose directory is gone unload. Errors are in the index and the log.
func (r *Repository) poll(ctx context.Context) {
	entries, err := ScanRepository(r.cfg.Dir)
	if err != nil {
		r.log.Warn("model repository: cannot read it; the models keep serving", "err", err)
		return
	}
	on := map[string]bool{}
	for _, e := range orderEntries(entries) {
		on[e.Name] = true
		_ = r.apply(ctx, e, false) // logged and in the index
	}
	r.mu.Lock()
	var gone []string
	for name, m := range r.models {
		switch {
		case on[name]:
		case m.state == StateReady:
			gone = append(gone, name)
		case m.state == StateUnavailable:
			delete(r.models, name) // gone from disk, and from the index
		}
	}
	r.mu.Unlock()
	for _, name := range gone {
		_ = r.unload(name, "its directory left the model repository", false)
		r.unloadDependents(name)
	}
}

// record returns the model's record, made UNAVAILABLE when new.
func (r *Repository) record(name string) *repoModel {
	r.mu.Lock()
	defer r.mu.Unlock()
	m := r.models[name]
	if m == nil {
		m = &repoModel{name: name, state: StateUnavailable, served: map[int64]*repoVersion{}, failed: map[int64]string{}, failedAt: map[int64]string{}}
		r.models[name] = m
	}
	return m
}

func (r *Repository) set(f func()) {
	r.mu.Lock()
	defer r.mu.Unlock()
	f()
}

// unload stops serving name; explicit marks it unloaded for polls.
func (r *Repository) unload(name, reason string, explicit bool) error {
	r.mu.Lock()
	m := r.models[name]
	if m == nil || m.state != StateReady {
		r.mu.Unlock()
		return status.Errorf(status.NotFound, "model %q is not loaded", name)
	}
	prev, version := m.served, m.highest()
	m.state, m.reason, m.unloaded = StateUnloading, "", explicit
	m.served, m.failed = map[int64]*repoVersion{}, map[int64]string{}
	r.mu.Unlock()
	for _, v := range prev {
		r.retire(name, v)
	}
	r.set(func() { m.state, m.reason = StateUnavailable, reason })
	r.log.Info("model repository: model unloaded", "name", name, "version", version, "reason", reason)
	return nil
}

// fileStamp identifies a model file's content cheaply: path, size, mtime.
func fileStamp(path string) string {
	st, err := os.Stat(path)
	if err != nil {
		return path
	}
	return fmt.Sprintf("%s %d %d", path, st.Size(), st.ModTime().UnixNano())
}

// StopNow closes every serving engine (see Unit.StopNow).
func (r *Repository) StopNow() {
	for _, u := range r.units() {
		u.StopNow()
	}
}

// Ready reports whether every serving model's worker runs.
func (r *Repository) Ready() bool {
	for _, u := range r.units() {
		if !u.Ready() {
			return false
		}
	}
	return true
}

// Close closes the engines once Run has returned; idempotent.
func (r *Repository) Close() error {
	var errs []error
	for _, u := range r.units() {
		errs = append(errs, u.Close())
	}
	return errors.Join(errs...)
}
