package infer

// What infer/prepost (the original's pre- and post-processing as
// ensemble steps) needs of the image code, exported without copying it.

// Validate reports the config key (imageResize, imageLayout, ...) of the
// first bad setting of p and what is wrong with it, as Config.Validate
// checks the image keys; "" and nil when p is good.
func (p ImagePre) Validate() (key string, err error) { return p.validate() }
