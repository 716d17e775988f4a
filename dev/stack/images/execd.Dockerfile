# The execd image the server copies /execd and /bootstrap.sh out of (it runs `tail -f /dev/null`
# in it to do so, so the base must have coreutils). The server copies exactly one file for execd,
# so the stand-in's modules are zipped into one executable file that the sandbox's python3 runs.
# A zip cannot record the build context's zero timestamps (before 1980), hence the touch.
FROM python:3.12-slim
COPY modules/ /usr/src/execd/
RUN touch -d "1980-01-01 00:00 UTC" /usr/src/execd/*.py \
    && python3 -m zipapp /usr/src/execd --output /execd --python "/usr/bin/env python3"
COPY bootstrap.sh /bootstrap.sh
