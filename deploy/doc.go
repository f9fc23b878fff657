// Package deploy holds Cordon's deployment artifacts, not Go code: the
// container image (Dockerfile), a Compose file with PostgreSQL + pgvector,
// the service role's init script (initdb/) and a one-shot migration that
// grants it, a hardened systemd unit, and Kubernetes manifests (k8s/, with
// the optional PodMonitor component k8s/podmonitor/). Its tests check them with real parsers and build the
// binary exactly as the Dockerfile does; see docs/running.md,
// "Deployment artifacts", for what they cover and what they do not.
package deploy
