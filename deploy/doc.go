// Package deploy holds no code: its test decodes every manifest of this
// directory (compose files, Kubernetes objects, the KEDA ScaledObject, the
// NATS server configuration) strictly, with the real API types, schemas
// and parsers. It is its own Go module so that the Kubernetes, KEDA and
// compose-spec modules stay out of the main module's go.mod.
package deploy
