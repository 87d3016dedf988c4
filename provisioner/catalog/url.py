"""Catalog URLs carry credentials (in the userinfo or the query string), so a URL is only ever
shown through `redacted`; and every way a catalog fails to open is one CatalogError that names
the redacted URL and what failed. No SQLAlchemy here: the CLI imports this to catch the error."""

from __future__ import annotations

import re
from pathlib import Path
from urllib.parse import unquote_plus

from provisioner.errors import ProvisionerError

HIDDEN = "***"

# scheme://user:PASSWORD@... as SQLAlchemy reads it (the user runs to the first ':', the password to
# the last '@'), and user:PASSWORD@host without a scheme; "sqlite:///a@b" has no password.
_USERINFO = re.compile(r"^(?P<head>[^:/?#\s]+://[^:/]*:|[^:/\s]*:(?!//))(?P<password>.*)@", re.DOTALL)
# key=value pairs of a libpq connection string ("host=db password=x"), for text that is no URL
_DSN_PAIR = re.compile(r"(?P<key>[^\s=]+)(?P<equals>\s*=\s*)(?P<value>'(?:[^'\\]|\\.)*'|\S*)")
# query keys whose values are secrets, matched case-insensitively inside the key
_SECRET_WORDS = ("password", "passwd", "secret", "token", "apikey", "api_key", "credential")
_SECRET_KEYS = {"pwd", "pass", "pw"}


def _is_secret(key: str) -> bool:
    name = unquote_plus(key).strip().lower()
    return name in _SECRET_KEYS or any(word in name for word in _SECRET_WORDS)


def _parts(url: str) -> tuple[str, str | None, str, str | None]:
    """(head, password, rest before the query, query): the URL is head + password + '@' + ..."""
    head, password, rest = "", None, url
    if found := _USERINFO.match(url):
        head, password, rest = found["head"], found["password"], url[found.end() - 1 :]
    before, mark, query = rest.partition("?")
    return head, password, before, query if mark else None


def redacted(url: str) -> str:
    """The URL with every password or token hidden: the userinfo's password and each secret query
    value (password, pwd, sslpassword, token, ...), whatever the case; the rest as written."""
    head, password, before, query = _parts(url)
    shown = head + (HIDDEN if password is not None else "") + before
    if query is not None:
        pairs = [pair.partition("=") for pair in query.split("&")]
        shown += "?" + "&".join(
            key + equals + (HIDDEN if equals and _is_secret(key) else value) for key, equals, value in pairs
        )
    elif "://" not in url and password is None:  # a libpq connection string, not a URL
        shown = _DSN_PAIR.sub(
            lambda m: m["key"] + m["equals"] + (HIDDEN if _is_secret(m["key"]) else m["value"]), url
        )
    return shown


def secrets_of(url: str) -> list[str]:
    """The secret values in the URL, as written and decoded (to scrub them from a driver's message)."""
    _, password, _, query = _parts(url)
    values = [password] if password else []
    for key, _, value in (pair.partition("=") for pair in (query or "").split("&")):
        if value and _is_secret(key):
            values.append(value)
    return sorted({v for raw in values for v in (raw, unquote_plus(raw))}, key=len, reverse=True)


class CatalogError(ProvisionerError):
    """The catalog could not be opened or used: `catalog <redacted URL>: <what failed> (<why>)`."""

    def __init__(self, url: str, problem: str, reason: str | None = None):
        if reason:
            for secret in secrets_of(url):
                reason = reason.replace(secret, HIDDEN)
        super().__init__(f"catalog {redacted(url)}: {problem}" + (f" ({reason})" if reason else ""))


def sqlite_path(url: str) -> Path | None:
    """The file a SQLite catalog URL names; None for another database or SQLite in memory."""
    if not url.startswith("sqlite"):
        return None
    path = url.split("///", 1)[1] if "///" in url else ""
    return Path(path) if path and path != ":memory:" else None
