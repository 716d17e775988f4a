"""The egress sidecar stand-in and the DNS pieces it shares with the resolver."""
