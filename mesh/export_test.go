package mesh

// GateWaiters is how many records wait at the running worker's gate for
// a slot (0 before Run).
func (w *Worker) GateWaiters() int {
	g := w.gate.Load()
	if g == nil {
		return 0
	}
	g.mu.Lock()
	defer g.mu.Unlock()
	return g.waiters
}
