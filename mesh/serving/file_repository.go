package serving

import "time"

// validateRepository checks modelRepository and modelRepositoryPoll:
// the repository excludes modelPath and models, and the poll is -1 (off),
// 0 (the default) or a number of seconds.
func (f *File) validateRepository(p *problems) {
	if f.ModelRepository != "" && (f.ModelPath != "" || len(f.Models) > 0) {
		p.bad("modelRepository", "set one of modelPath (one model), models (a list) and modelRepository (a directory of models), not several")
	}
	if f.ModelRepositoryPoll < -1 {
		p.bad("modelRepositoryPoll", "%d: want seconds, 0 for the default (%v) or -1 for no polling", f.ModelRepositoryPoll, DefaultRepositoryPoll)
	}
	if f.ModelRepositoryPoll != 0 && f.ModelRepository == "" {
		p.bad("modelRepositoryPoll", "needs modelRepository")
	}
}

// Repository maps modelRepository, modelRepositoryPoll and jobName onto
// the node's RepositoryConfig; zero without modelRepository.
func (f *File) Repository() RepositoryConfig {
	if f.ModelRepository == "" {
		return RepositoryConfig{}
	}
	poll := DefaultRepositoryPoll
	switch {
	case f.ModelRepositoryPoll < 0:
		poll = 0
	case f.ModelRepositoryPoll > 0:
		poll = time.Duration(f.ModelRepositoryPoll) * time.Second
	}
	return RepositoryConfig{Dir: f.ModelRepository, Poll: poll, Job: f.JobName}
}
