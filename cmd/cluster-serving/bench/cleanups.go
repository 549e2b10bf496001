package bench

// cleanups are the closing functions of what a bench part opened, run
// last first, as defers would.
type cleanups []func()

// add appends f, to run before those added earlier.
func (cs *cleanups) add(f func()) { *cs = append(*cs, f) }

// run runs every cleanup, last added first. Its receiver is a pointer so
// that `defer cs.run()` runs the cleanups added after the defer too: a
// value receiver is copied when the defer is read, and the copy was
// empty (scale_tiny left each layout's processes running: issue 35).
func (cs *cleanups) run() {
	for i := len(*cs) - 1; i >= 0; i-- {
		(*cs)[i]()
	}
}
