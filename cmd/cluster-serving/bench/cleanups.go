package bench

// cleanups are the closing functions of what a bench part opened, run
// last first, as defers would.
type cleanups []func()

// add appends f, to run before those added earlier.
func (cs *cleanups) add(f func()) { *cs = append(*cs, f) }

// run runs every cleanup, last added first.
func (cs cleanups) run() {
	for i := len(cs) - 1; i >= 0; i-- {
		cs[i]()
	}
}
