"""A single-node Kubernetes built from the Go module proxy, for the Kubernetes-runtime tests."""
