package telemetry

// OutcomeOf maps the status of an answer (HTTP codes, which the mesh and
// every door share) to the value of AttrOutcome: below 400 OutcomeOK, 504
// OutcomeTimeout, 429 and 503 OutcomeRejected (a bounded queue or token
// bucket said no), any other 4xx OutcomeBadInput, the rest OutcomeError.
func OutcomeOf(status int) string {
	switch {
	case status < 400:
		return OutcomeOK
	case status == 504:
		return OutcomeTimeout
	case status == 429 || status == 503:
		return OutcomeRejected
	case status < 500:
		return OutcomeBadInput
	}
	return OutcomeError
}
