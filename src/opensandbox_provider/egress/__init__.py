"""
The egress sidecar's wire: a sandbox's network policy as the server takes it, read back from
the sidecar and checked. Whether a sandbox may run under it is decided in ``sandbox/``.
"""
