# The sandbox image plus Airflow's worker packages at the versions the project pins, for the
# OpenSandboxExecutor's tries. Debian's python3 reads /usr/local/lib/python3.11/dist-packages.
FROM python:3.12-slim
COPY site /usr/local/lib/python3.11/dist-packages/
# Compiled once here, not at each try's start: a try imports most of Airflow.
RUN python3 -m compileall -q -j 2 /usr/local/lib/python3.11/dist-packages > /dev/null; true
