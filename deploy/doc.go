// Package deploy holds Cordon's deployment artifacts, not Go code: the
// container image (Dockerfile), a Compose file with PostgreSQL + pgvector
// and a one-shot migration, a hardened systemd unit, and Kubernetes
// manifests (k8s/). Its tests check them with real parsers and build the
// binary exactly as the Dockerfile does; see docs/operations.md,
// "Deployment artifacts", for what they cover and what they do not.
package deploy
