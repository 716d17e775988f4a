"""The local OpenSandbox stack: real servers on a real Docker engine, with our own stand-ins
for execd and the egress sidecar.

``python -m dev.stack up`` starts it; ``.stack/state.json`` then describes it (see ``state.py``).
"""
