"""How execd turns a requested path into one on disk: Go's os.Expand, a leading ~, then Abs."""

import os
import re

_SHELL_SPECIAL = set("*#$@!?-0123456789")
_ENV_REFERENCE = re.compile(r"\$\{([A-Za-z_][A-Za-z0-9_]*)\}|\$([A-Za-z_][A-Za-z0-9_]*)")


class PathError(Exception):
    """A path execd could not resolve (undefined variable, no home directory)."""


def _shell_name(text: str) -> tuple[str, int]:
    """The name after a '$' and how many characters it spans, as Go's os.Expand reads it."""
    if text[0] == "{":
        if len(text) > 2 and text[1] in _SHELL_SPECIAL and text[2] == "}":
            return text[1], 3
        closing = text.find("}", 1)
        if closing == 1:
            return "", 2
        if closing == -1:
            return "", 1
        return text[1:closing], closing + 1
    if text[0] in _SHELL_SPECIAL:
        return text[0], 1
    name = re.match(r"[A-Za-z0-9_]*", text).group()
    return name, len(name)


def go_expand(text: str, lookup) -> str:
    """Go's os.Expand: $NAME and ${NAME} are replaced, bad syntax is dropped, a lone '$' stays."""
    out = []
    index = 0
    while index < len(text):
        if text[index] == "$" and index + 1 < len(text):
            name, width = _shell_name(text[index + 1 :])
            if name:
                out.append(lookup(name))
            elif width == 0:
                out.append("$")
            index += 1 + width
        else:
            out.append(text[index])
            index += 1
    return "".join(out)


def expand_path(path: str, overrides: dict | None = None) -> str:
    """$VAR, ${VAR} and a leading ~ are expanded; an undefined variable fails
    (docs/execd-wire.rst, wire-paths)."""
    if not path:
        return ""
    env = {**os.environ, **(overrides or {})}
    missing = sorted({braced or bare for braced, bare in _ENV_REFERENCE.findall(path)} - env.keys())
    if missing:
        raise PathError("path references undefined environment variables: " + ",".join(missing))
    expanded = go_expand(path, lambda name: env.get(name, ""))
    if expanded == "~" or expanded.startswith(("~/", "~\\")):
        home = os.environ.get("HOME", "")
        if not home:
            raise PathError("$HOME is not defined")
        return home if expanded == "~" else os.path.normpath(os.path.join(home, expanded[2:]))
    return expanded


def expand_absolute_path(path: str) -> str:
    """Expanded, then made absolute against execd's working directory (Go's filepath.Abs)."""
    return os.path.abspath(expand_path(path))
