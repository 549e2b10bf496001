package prepost

import "errors"

// ErrConfig wraps every error of New: the step's config.pbtxt declares
// something the step cannot be (an unknown step or parameter, a bad
// value, an input or output that disagrees with the step's). The message
// names the field or parameter, what it got and what it wants.
var ErrConfig = errors.New("prepost: invalid step config")
