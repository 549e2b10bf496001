package infer

// MaxRequestBatch is Config.MaxRequestBatch: the most rows a request may
// carry along dim 0 (a config.pbtxt's max_batch_size); 0: no bound. The
// engine bounds each record it is given, but a codec that splits a
// request into one record per row (so that the batcher can stack rows of
// concurrent requests) hands it records of one row each: such a codec
// bounds the request itself, with CheckRequestBatch, before it splits.
func (e *Engine) MaxRequestBatch() int { return e.cfg.MaxRequestBatch }

// CheckRequestBatch returns the *InputError of a request of rows rows
// along dim 0 when limit (a model's max_batch_size) is above 0 and rows
// exceed it, naming input (any of the request's inputs: they share dim
// 0); nil otherwise. Triton refuses such a request whether or not the
// model batches dynamically, and so does every codec here.
func CheckRequestBatch(input string, rows int64, limit int) error {
	if limit > 0 && rows > int64(limit) {
		return NewInputError(-1, input, "batch of %d rows exceeds the model's max_batch_size %d", rows, limit)
	}
	return nil
}
