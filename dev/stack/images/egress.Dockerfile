# The egress sidecar. The program sits beside the modules of its directory, so it imports them
# by their plain names (a script's own directory is on sys.path). The server creates the sidecar
# without a command, so the image must name one.
FROM python:3.12-slim
COPY modules/ /opt/egress/
COPY egress /opt/egress/egress
CMD ["/opt/egress/egress"]
