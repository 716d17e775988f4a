"""The doublestar-style pattern GET /files/search matches base names with
(docs/execd-wire.rst, wire-search)."""

import re

from filesystem import FileError


class BadPattern(Exception):
    """doublestar's ErrBadPattern."""

    def __str__(self) -> str:
        return "syntax error in pattern"


def glob_to_regex(pattern: str) -> str:
    """execd's doublestar-style matching of a base name: * and ** (any run of characters),
    ?, [class] / [!class] / [^class], {alt,ernatives} and backslash escapes
    (docs/execd-wire.rst, wire-search)."""
    out, index, depth = [], 0, 0
    while index < len(pattern):
        char = pattern[index]
        if char == "*":
            out.append(".*")
            while index + 1 < len(pattern) and pattern[index + 1] == "*":
                index += 1
        elif char == "?":
            out.append(".")
        elif char == "\\":
            index += 1
            if index >= len(pattern):
                raise BadPattern
            out.append(re.escape(pattern[index]))
        elif char == "[":
            index, expression = _character_class(pattern, index)
            out.append(expression)
        elif char == "{":
            depth += 1
            out.append("(?:")
        elif char == "}" and depth:
            depth -= 1
            out.append(")")
        elif char == "," and depth:
            out.append("|")
        elif char == "}":
            raise BadPattern
        else:
            out.append(re.escape(char))
        index += 1
    if depth:
        raise BadPattern
    return "".join(out)


def _character_class(pattern: str, index: int) -> tuple[int, str]:
    """The [..] starting at index: returns the index of its ']' and the equivalent regex."""
    index += 1
    negate = index < len(pattern) and pattern[index] in "!^"
    if negate:
        index += 1
    if index >= len(pattern) or pattern[index] == "]":
        raise BadPattern
    members = []
    while index < len(pattern) and pattern[index] != "]":
        if pattern[index] == "\\":
            index += 1
            if index >= len(pattern):
                raise BadPattern
        members.append(pattern[index])
        index += 1
    if index >= len(pattern):
        raise BadPattern
    body = ""
    position = 0
    while position < len(members):
        if position + 2 < len(members) and members[position + 1] == "-":
            body += f"{re.escape(members[position])}-{re.escape(members[position + 2])}"
            position += 3
        else:
            body += re.escape(members[position])
            position += 1
    return index, f"[{'^' if negate else ''}{body}]"


class BaseNameMatcher:
    """The pattern is compiled when the first file is tested, so a bad pattern fails only when
    there is something to test (docs/execd-wire.rst, wire-search)."""

    def __init__(self, pattern: str):
        self._pattern = pattern
        self._regex = None

    def matches(self, name: str) -> bool:
        if self._regex is None:
            try:
                self._regex = re.compile(glob_to_regex(self._pattern), re.DOTALL)
            except (BadPattern, re.error):
                raise FileError(f"invalid pattern {self._pattern}: {BadPattern()}") from None
        return self._regex.fullmatch(name) is not None
