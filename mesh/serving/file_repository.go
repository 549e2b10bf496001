package serving

import (
	"time"

	"github.com/cluster-serving/cluster-serving/mesh"
)

// validateRepository checks modelRepository, modelRepositoryPoll and
// modelControl: the repository excludes modelPath and models, the poll is
// -1 (off), 0 (the default) or a number of seconds, and polls only with
// modelControl poll.
func (f *File) validateRepository(p *problems) {
	switch f.ModelControl {
	case "", ControlPoll, ControlExplicit, ControlNone:
	default:
		p.bad("modelControl", "%q: want %s (the default), %s or %s", f.ModelControl, ControlPoll, ControlExplicit, ControlNone)
	}
	switch {
	case f.ModelControl != "" && f.ModelRepository == "":
		p.bad("modelControl", "needs modelRepository")
	case f.ModelRepositoryPoll > 0 && (f.ModelControl == ControlExplicit || f.ModelControl == ControlNone):
		p.bad("modelRepositoryPoll", "%d: modelControl %s does not poll; leave it out, or set modelControl: poll", f.ModelRepositoryPoll, f.ModelControl)
	case f.ModelRepositoryPoll == -1 && f.ModelControl == ControlPoll:
		p.bad("modelRepositoryPoll", "-1 (no polling) contradicts modelControl poll: set modelControl: explicit or none instead")
	}
	if f.ModelRepository != "" && (f.ModelPath != "" || len(f.Models) > 0) {
		p.bad("modelRepository", "set one of modelPath (one model), models (a list) and modelRepository (a directory of models), not several")
	}
	if f.ModelRepositoryPoll < -1 {
		p.bad("modelRepositoryPoll", "%d: want seconds, 0 for the default (%v) or -1 for no polling", f.ModelRepositoryPoll, DefaultRepositoryPoll)
	}
	if f.ModelRepositoryPoll != 0 && f.ModelRepository == "" {
		p.bad("modelRepositoryPoll", "needs modelRepository")
	}
	if len(f.ServeModels) > 0 && f.ModelRepository == "" {
		p.bad("serveModels", "needs modelRepository: it picks which of the repository's models this process serves")
	}
	for _, name := range f.ServeModels {
		if err := mesh.ValidateJob(name); err != nil {
			p.bad("serveModels", "%q is not a model name: letters, digits, '_' and '-' only", name)
		}
	}
}

// Repository maps modelRepository, modelRepositoryPoll, modelControl and
// jobName onto the node's RepositoryConfig; zero without modelRepository.
// modelControl defaults to poll, which keeps the node's polling and, as
// Triton's poll mode, refuses the load/unload API: nobody on the network
// changes what serves unless the deployer asks (explicit). Only
// modelRepositoryPoll: -1, which meant "only the load API changes what
// serves" before modelControl existed, defaults to explicit.
func (f *File) Repository() RepositoryConfig {
	if f.ModelRepository == "" {
		return RepositoryConfig{}
	}
	control := f.ModelControl
	if control == "" {
		control = ControlPoll
		if f.ModelRepositoryPoll < 0 {
			control = ControlExplicit
		}
	}
	rc := RepositoryConfig{Dir: f.ModelRepository, Job: f.JobName, Control: control, Serve: f.ServeModels}
	if control == ControlPoll {
		rc.Poll = DefaultRepositoryPoll
		if f.ModelRepositoryPoll > 0 {
			rc.Poll = time.Duration(f.ModelRepositoryPoll) * time.Second
		}
	}
	return rc
}
