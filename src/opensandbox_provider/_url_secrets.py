"""
Credentials written into URLs (``https://user:token@host``, ``?token=...``): found, so that
they can be masked, and hidden, so that a message quoting a command never shows them.

pip takes an index's credentials in its URL, and ``pip_args`` or a requirement such as
``pkg @ https://host/pkg.whl?token=...`` carries them into the set-up command, which the
backend logs and a failed set-up quotes.
"""

from __future__ import annotations

import re
from urllib.parse import unquote

HIDDEN = "***"

# A URL runs until whitespace or a quote, as a URL in a shell command or an argument does.
_URL = re.compile(r"[A-Za-z][A-Za-z0-9+.-]*://[^\s'\"]+")
# Query parameters whose value is a credential by its name: tokens, keys, passwords and the
# signatures of pre-signed URLs. A harmless value matched by mistake is only hidden.
_SECRET_PARAMETER = re.compile(
    r"token|key|secret|pass|pwd|auth|signature|sig|credential|session", re.IGNORECASE
)
# Over HTTP a user name alone is how a token is given (``https://<token>@host``); over SSH
# it is the account (``git@host``), no secret.
_TOKEN_AS_USER_SCHEMES = ("http", "https")


def url_secrets(text: str) -> list[str]:
    """Every credential in a URL in ``text``, as written and, where it differs, decoded."""
    found: list[str] = []
    for match in _URL.finditer(text):
        for secret in _in_url(match.group()):
            found.extend(dict.fromkeys([secret, unquote(secret)]))
    return list(dict.fromkeys(s for s in found if s))


def without_url_secrets(text: str) -> str:
    """``text`` with every credential in a URL in it replaced by ``***``."""

    def hidden(match: re.Match[str]) -> str:
        url = match.group()
        # Longest first, so that a secret holding another is hidden whole.
        for secret in sorted(_in_url(url), key=len, reverse=True):
            url = url.replace(secret, HIDDEN)
        return url

    return _URL.sub(hidden, text)


def _in_url(url: str) -> list[str]:
    """The credentials of one URL: its user information's and its query's."""
    scheme, _, rest = url.partition("://")
    authority = re.split(r"[/?#]", rest, maxsplit=1)[0]
    secrets = []
    if "@" in authority:
        user_info = authority.rpartition("@")[0]
        user, colon, password = user_info.partition(":")
        if colon:
            secrets.append(password)
        elif scheme.lower().rpartition("+")[2] in _TOKEN_AS_USER_SCHEMES:
            secrets.append(user)
    query = rest.partition("?")[2].partition("#")[0]
    for parameter in query.split("&"):
        name, equals, value = parameter.partition("=")
        if equals and value and _SECRET_PARAMETER.search(name):
            secrets.append(value)
    return [secret for secret in secrets if secret]
