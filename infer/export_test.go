package infer

import (
	"testing"
	"time"
)

// SetDecodeHook makes f run while each image holds its decode slot and
// memory budget, until tb ends. Tests that set it must not run in
// parallel.
func SetDecodeHook(tb testing.TB, f func()) {
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
