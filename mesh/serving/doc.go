// Package serving runs models on the mesh. This first part is config.yaml
// (File): parsed with every key checked by name, and mapped onto the
// Configs of the packages that use its values.
//
// A zero setting in File means the default of the package that uses it;
// File fills only what config.yaml itself derives (jobName, model
// versions, threads from coreNumberPerMachine).
package serving
