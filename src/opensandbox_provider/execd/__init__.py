"""
execd's wire protocol: the one request path to a sandbox's services, the bounded parsers of
its chunked bodies and event streams, whole-call deadlines, and the client for commands,
files and statuses. Nothing here decides what to do about a sandbox; ``sandbox/`` does.
"""
