package infer

import (
	"image"
	"testing"
	"time"
)

// SetDecodeHook makes f run with each image's header while the image
// holds its decode slot and memory budget, until tb ends. Tests that set it must not run in
// parallel.
func SetDecodeHook(tb testing.TB, f func(image.Config)) {
	decodeHook = f
	tb.Cleanup(func() { decodeHook = nil })
}

// SetImageBudgetWait shortens the wait for memory budget until tb ends.
func SetImageBudgetWait(tb testing.TB, d time.Duration) {
	old := imageBudgetWait
	imageBudgetWait = d
	tb.Cleanup(func() { imageBudgetWait = old })
}

// DecodeCost is decodeCost for tests.
var DecodeCost = decodeCost

// BytesPerPixel is bytesPerPixel for tests.
var BytesPerPixel = bytesPerPixel

// ImageSlotWaiters returns how many images wait for a decode slot of the
// gate of concurrency and budget.
func ImageSlotWaiters(concurrency int, budget int64) int {
	return sharedGate(concurrency, budget).slots.waiters()
}
