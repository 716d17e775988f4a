# The execd image the server copies /execd and /bootstrap.sh out of (it runs `tail -f /dev/null`
# in it to do so, so the base must have coreutils).
FROM python:3.12-slim
COPY execd /execd
COPY bootstrap.sh /bootstrap.sh
