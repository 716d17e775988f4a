#!/bin/sh
# Container entrypoint the server installs as /opt/opensandbox/bootstrap.sh: start execd in the
# background, then run the sandbox's own entrypoint, which decides how long the container lives.
set -e

EXECD="${EXECD:-/opt/opensandbox/execd}"

# execd re-reads this file before every command, so it must exist even when empty.
EXECD_ENVS="${EXECD_ENVS:-/opt/opensandbox/.env}"
mkdir -p "$(dirname "$EXECD_ENVS")"
touch "$EXECD_ENVS"
export EXECD_ENVS

if [ -n "${EXECD_BOOTSTRAP_PRE_SCRIPT:-}" ] && [ -r "$EXECD_BOOTSTRAP_PRE_SCRIPT" ]; then
    # Sourced, not run, so its exports reach execd and the entrypoint.
    . "$EXECD_BOOTSTRAP_PRE_SCRIPT"
fi

"$EXECD" &

if [ -n "${BOOTSTRAP_SHELL:-}" ]; then
    SHELL_BIN="$BOOTSTRAP_SHELL"
elif command -v bash >/dev/null 2>&1; then
    SHELL_BIN=bash
else
    SHELL_BIN=sh
fi

if [ -n "${BOOTSTRAP_CMD:-}" ]; then
    "$SHELL_BIN" -c "$BOOTSTRAP_CMD" &
elif [ "${1:-}" = "-c" ]; then
    shift
    "$SHELL_BIN" -c "$*" &
elif [ "$#" -eq 0 ]; then
    "$SHELL_BIN" &
else
    "$@" &
fi
CMD_PID=$!

# `docker stop` sends TERM to this script (PID 1); pass it on so the entrypoint can exit cleanly.
trap 'kill -TERM "$CMD_PID" 2>/dev/null; wait "$CMD_PID" 2>/dev/null; exit 0' TERM

set +e
wait "$CMD_PID"
exit $?
