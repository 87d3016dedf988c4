"""YAML documents that remember where each value came from, and errors that say so.

A `Diagnostic` reads `fleet.yaml:14: clusters[azure-ml].pools[a100mig7].gpu.mig: <message>`:
file, line, the field by a path that names list items by their `name`, and what is wrong.

A fleet file may be anything a user points the tool at, so reading is bounded before any YAML
is built: its size, its characters, how deep it nests, how far its aliases expand, and how long
its numbers are. Each limit is far beyond a real fleet file and ends in a Diagnostic, never a
crash. The size limit is the user's to change (PROVISIONER_FLEET_MAX_MB), and the aliases' limit
grows with it.
"""

from __future__ import annotations

import functools
import math
import os
import re
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from ruamel.yaml import YAML
from ruamel.yaml.comments import CommentedMap, CommentedSeq
from ruamel.yaml.error import MarkedYAMLError, YAMLError
from ruamel.yaml.events import (
    AliasEvent,
    CollectionEndEvent,
    CollectionStartEvent,
    DocumentStartEvent,
    MappingEndEvent,
    MappingStartEvent,
    ScalarEvent,
    SequenceEndEvent,
    SequenceStartEvent,
)

from provisioner.errors import Diagnostic, FleetError, InvalidOption

Loc = tuple[str | int, ...]

# A 3,000-cluster, 12,000-pool fleet written by hand (block style, comments, labels) is about
# 5 MB; reading stops at the limit so that an endless stream (FLEET=/dev/zero, a mistaken device
# or pipe) cannot exhaust memory. MAX_MB_ENV sets another limit, in MB (fractions allowed).
MAX_MB_ENV = "PROVISIONER_FLEET_MAX_MB"
DEFAULT_MAX_MB = 16.0
_MB = 1024 * 1024
_READ_CHUNK = _MB  # read in steps, so that a large limit costs memory only for what is there
# A fleet file nests about eight levels; the YAML libraries and the validators recurse per level.
MAX_DEPTH = 64
# Values aliases may add, all told, per MB of the size limit: a MB of fleet file holds about
# 75,000 values written out (block style), so aliases cannot make a document cost more to build
# than a file at the limit does. Merge keys (`<<: *pool`) on each of 12,000 pools add about
# 280,000; an alias bomb ("billion laughs") adds billions from a few hundred bytes.
ALIAS_VALUES_PER_MB = 100_000
# Python refuses to turn longer decimal strings into ints (sys.get_int_max_str_digits).
MAX_NUMBER_DIGITS = 4300
SHOWN_CHARS = 100  # how much of a value a message echoes
# The characters YAML allows in a stream (YAML 1.2, 5.1 "Character Set"; ruamel's reader).
_NOT_YAML = re.compile("[^\x09\x0a\x0d\x20-\x7e\x85\xa0-\ud7ff\ue000-\ufffd\U00010000-\U0010ffff]")
_DECIMAL = re.compile(r"[-+]?[0-9][0-9_]*")
_INT_TAG = "tag:yaml.org,2002:int"


def shown(value: Any, limit: int = SHOWN_CHARS) -> str:
    """`value` as a message quotes it (repr), cut to `limit` characters with an ellipsis."""
    try:
        text = repr(value)
    except ValueError:  # an int past the interpreter's digit limit
        text = "<a number too long to show>"
    return text if len(text) <= limit else f"{text[: limit - 1]}…"


def max_megabytes() -> float:
    """The fleet file size limit in MB: MAX_MB_ENV, or DEFAULT_MAX_MB. InvalidOption unless a
    positive number."""
    value = os.environ.get(MAX_MB_ENV)
    if value is None or not value.strip():
        return DEFAULT_MAX_MB
    try:
        megabytes = float(value)
    except ValueError:
        megabytes = math.nan
    if not 0 < megabytes < math.inf:
        raise InvalidOption(
            MAX_MB_ENV, f"{shown(value, 40)} is not a positive number (the largest fleet file to read, in MB)"
        )
    return megabytes


def max_alias_values(megabytes: float) -> int:
    """How many values aliases may add to a document under a size limit of `megabytes`."""
    return max(1, int(ALIAS_VALUES_PER_MB * megabytes))


def read_text(path: str | Path) -> str:
    """The text of a fleet file, read once (a pipe can be read only once) and bounded in size."""
    file = str(path)
    megabytes = max_megabytes()
    limit = max(1, int(megabytes * _MB))
    chunks: list[bytes] = []
    size = 0
    try:
        with Path(path).open("rb") as stream:
            while size <= limit:
                chunk = stream.read(min(_READ_CHUNK, limit + 1 - size))
                if not chunk:
                    break
                chunks.append(chunk)
                size += len(chunk)
    except OSError as exc:
        raise FleetError([Diagnostic(file, None, "", f"cannot read: {exc.strerror or exc}")]) from exc
    if size > limit:
        raise FleetError(
            [
                Diagnostic(
                    file,
                    None,
                    "",
                    f"is larger than {megabytes:g} MB, so it is not a fleet file; reading stops there so "
                    f"that an endless stream cannot exhaust memory (set {MAX_MB_ENV} to read larger files)",
                )
            ]
        )
    data = b"".join(chunks)
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError as exc:
        line = data[: exc.start].count(b"\n") + 1
        message = f"is not UTF-8 text (byte 0x{data[exc.start]:02x}); save it as UTF-8"
        raise FleetError([Diagnostic(file, line, "", message)]) from exc


class SourceDocument:
    """A parsed YAML file: its plain data, and the positions of every key and item.

    The data comes from ruamel's safe loader (its C parser where ruamel.yaml.clib is installed);
    the positions from a round-trip parse, several times slower, made only when a diagnostic
    first needs a line. Both are ruamel with the same YAML 1.2 resolver, so they agree.
    """

    def __init__(self, file: str, text: str, data: Any):
        self.file = file
        self.data = data  # plain dicts, lists and scalars
        self._text = text

    @functools.cached_property
    def _tree(self) -> Any:
        """The document as ruamel's round-trip nodes, which carry line numbers."""
        return YAML(typ="rt").load(self._text)

    @classmethod
    def read(cls, path: str | Path) -> SourceDocument:
        return cls.parse(read_text(path), str(path))

    @classmethod
    def parse(cls, text: str, file: str) -> SourceDocument:
        _check_characters(text, file)
        builder = _Builder()
        aliases = max_alias_values(max_megabytes())
        try:
            _check_shape(builder.fed(YAML(typ="safe").parse(text)), file, aliases)
        except MarkedYAMLError:
            # libyaml scans by YAML 1.1 and refuses some 1.2 documents (an ARN in a flow
            # mapping): the pure-Python round-trip parser is the judge.
            builder.unusual = True
            try:
                _check_shape(YAML(typ="rt").parse(text), file, aliases)
            except MarkedYAMLError as exc:
                raise FleetError([_yaml_error(file, exc)]) from exc
        if not builder.unusual:  # the common file, built from the events the checks walked
            return cls(file, text, builder.data)
        try:
            try:
                return cls(file, text, _plain(YAML(typ="safe").load(text)))
            except MarkedYAMLError:
                document = cls(file, text, None)
                document.data = _plain(document._tree)
                return document
        except MarkedYAMLError as exc:
            raise FleetError([_yaml_error(file, exc)]) from exc
        except (YAMLError, ValueError, RecursionError) as exc:  # the checks above should leave none
            raise FleetError([Diagnostic(file, None, "", f"invalid YAML: {shown(str(exc), 200)}")]) from exc

    def diagnostic(self, loc: Loc, message: str) -> Diagnostic:
        line, path = self.locate(loc)
        return Diagnostic(self.file, line, path, message)

    def locate(self, loc: Loc) -> tuple[int | None, str]:
        """The line of the deepest part of `loc` present in the file, and `loc` as a named path.

        Elements of `loc` that are not in the document (a missing field, a validator's tag) keep
        the line of their parent; string ones still appear in the path.
        """
        node, line, parts = self._tree, _line_of(self._tree), []
        for step in loc:
            child = _child(node, step)
            if child is _MISSING:
                if isinstance(step, str) and not step.startswith("["):
                    parts.append(f".{step}" if parts else step)
                node = None
                continue
            line = _position(node, step) or line
            parts.append(_path_part(step, child, first=not parts))
            node = child
        return line, "".join(parts)


def _yaml_error(file: str, exc: MarkedYAMLError) -> Diagnostic:
    mark = exc.problem_mark or exc.context_mark
    line = mark.line + 1 if mark else None
    problem = " ".join(filter(None, [exc.context, exc.problem])) or "invalid YAML"
    return Diagnostic(file, line, "", f"invalid YAML: {problem}")


def _check_characters(text: str, file: str) -> None:
    """Control characters and NUL are not YAML: name the first and its line."""
    bad = _NOT_YAML.search(text)
    if bad is not None:
        line = text.count("\n", 0, bad.start()) + 1
        raise FleetError(
            [
                Diagnostic(
                    file,
                    line,
                    "",
                    f"invalid YAML: character U+{ord(bad.group()):04X} is a control character, "
                    "which YAML does not allow (is this a text file?)",
                )
            ]
        )


@dataclass
class _Open:
    """A collection the event walk is inside: what `_check_shape` needs to know of it."""

    anchor: str | None
    mapping: bool
    step: str | int | None  # where it sits in its parent
    size: int = 1  # values in it so far, itself included, aliases expanded
    items: int = 0  # children seen (keys and values alike in a mapping)
    key: Any = None  # a mapping's latest key
    name: str | None = None  # a mapping's `name:` value, which paths show for list items


def _check_shape(events: Iterable[Any], file: str, max_aliased: int) -> None:
    """Walk the parser's events (no recursion, nothing built) and refuse what would blow up
    building the document: nesting past MAX_DEPTH, aliases that add more than `max_aliased`
    values, integers past MAX_NUMBER_DIGITS."""
    sizes: dict[str, int] = {}  # anchor -> values its node holds, itself included
    stack: list[_Open] = []
    added = 0

    def step() -> str | int | None:
        """Where the next node goes in the open collection (None: it is a mapping key)."""
        if not stack:
            return None
        parent = stack[-1]
        if not parent.mapping:
            return parent.items
        return None if parent.items % 2 == 0 else str(parent.key)

    def fail(event: Any, message: str, at: str | int | None = None, where: bool = True) -> FleetError:
        line = event.start_mark.line + 1 if event.start_mark else None
        return FleetError([Diagnostic(file, line, _open_path(stack, at) if where else "", message)])

    def add(anchor: str | None, size: int, value: Any = None) -> None:
        if anchor is not None:
            sizes[anchor] = size
        if stack:
            parent = stack[-1]
            if parent.mapping and parent.items % 2 == 0:
                parent.key = value
            elif parent.mapping and parent.key == "name" and isinstance(value, str):
                parent.name = value
            parent.size += size
            parent.items += 1

    for event in events:
        if isinstance(event, CollectionStartEvent):
            if len(stack) >= MAX_DEPTH:
                message = f"nested deeper than {MAX_DEPTH} levels; a fleet file needs about 8"
                raise fail(event, message, where=False)  # the path would be as deep
            stack.append(_Open(event.anchor, isinstance(event, MappingStartEvent), step()))
        elif isinstance(event, CollectionEndEvent):
            done = stack.pop()
            add(done.anchor, done.size)
        elif isinstance(event, AliasEvent):
            if any(frame.anchor == event.anchor for frame in stack):
                raise fail(event, f"alias *{cut(event.anchor)} refers to a node that contains it", step())
            size = sizes.get(event.anchor, 1)  # an unknown anchor: the loader reports it
            added += size
            if added > max_aliased:
                raise fail(
                    event,
                    f"aliases expand this document past {max_aliased:,} values (an alias bomb?); a fleet "
                    f"file's aliases and merge keys add far fewer (the limit grows with {MAX_MB_ENV})",
                    step(),
                )
            add(None, size)
        elif isinstance(event, ScalarEvent):
            plain = not event.style and event.tag in (None, "!")
            if (plain or event.tag == _INT_TAG) and _DECIMAL.fullmatch(event.value):
                digits = sum(c.isdigit() for c in event.value)
                if digits > MAX_NUMBER_DIGITS:
                    raise fail(
                        event,
                        f"a number of {digits} digits; numbers here have at most {MAX_NUMBER_DIGITS}",
                        step(),
                    )
            add(event.anchor, 1, event.value)


def _open_path(stack: list[_Open], at: str | int | None) -> str:
    """The path of the node the event walk is at, list items by `name` where it came first."""
    parts: list[str] = []
    for frame in [*stack[1:], _Open(None, False, at)]:
        if isinstance(frame.step, int):
            parts.append(f"[{cut(frame.name)}]" if frame.name else f"[{frame.step}]")
        elif frame.step is not None:
            parts.append(_path_part(frame.step, None, first=not parts))
    return "".join(parts)


_MISSING = object()
_PLAIN_KEY = re.compile(r"^[A-Za-z_][A-Za-z0-9_-]*$")


def _child(node: Any, step: str | int) -> Any:
    if isinstance(node, CommentedMap) and step in node:
        return node[step]
    if isinstance(node, CommentedSeq) and isinstance(step, int) and 0 <= step < len(node):
        return node[step]
    return _MISSING


def _position(node: Any, step: str | int) -> int | None:
    try:
        if isinstance(node, CommentedMap):
            return node.lc.key(step)[0] + 1
        return node.lc.item(step)[0] + 1
    except (AttributeError, KeyError, IndexError, TypeError):
        return None


def _line_of(node: Any) -> int | None:
    lc = getattr(node, "lc", None)
    return lc.line + 1 if lc is not None and lc.line is not None else None


def _path_part(step: str | int, child: Any, first: bool) -> str:
    if isinstance(step, int):
        name = child.get("name") if isinstance(child, CommentedMap) else None
        return f"[{cut(name)}]" if isinstance(name, str) and name else f"[{step}]"
    if not _PLAIN_KEY.match(step):
        return f'["{cut(step)}"]'  # label keys such as nvidia.com/gpu.product
    return cut(step) if first else f".{cut(step)}"


def cut(text: str) -> str:
    """A name as a path shows it: a hostile file's 50 MB name must not make a 50 MB message."""
    return text if len(text) <= SHOWN_CHARS else f"{text[: SHOWN_CHARS - 1]}…"


def _plain(node: Any) -> Any:
    """Loaded YAML as plain Python (keys as text), so validation sees ordinary values."""
    if isinstance(node, dict):
        return {str(k) if not isinstance(k, str) else k: _plain(v) for k, v in node.items()}
    if isinstance(node, list):
        return [_plain(v) for v in node]
    if isinstance(node, bool):
        return bool(node)
    if isinstance(node, int):
        return int(node)
    if isinstance(node, float):
        return float(node)
    if isinstance(node, str):
        return str(node)
    return node


# Plain scalars whose YAML 1.2 tag is one of these are built here; anything else (merge keys,
# timestamps, explicit tags, anchors, aliases, directives) goes to ruamel's own loader.
_SCALAR_TAGS = frozenset(f"tag:yaml.org,2002:{name}" for name in ("str", "int", "float", "bool", "null"))


class _Unusual(Exception):
    """The document uses something the event builder leaves to ruamel's loader."""


@functools.cache
def _scalar_rules() -> tuple[Any, Any, frozenset[str]]:
    """ruamel's YAML 1.2 resolver and safe constructor, and the first characters its rules match."""
    from ruamel.yaml.constructor import SafeConstructor
    from ruamel.yaml.resolver import VersionedResolver

    class Version12:  # what the constructor asks of its loader: the YAML version in force
        typ = "safe"
        resolver = VersionedResolver(version=(1, 2))

    loader = Version12()
    first = frozenset(key for key in loader.resolver.versioned_resolver if key)
    if None in loader.resolver.versioned_resolver:  # a rule for any first character: resolve all
        first = frozenset()
    return loader.resolver, SafeConstructor(loader=loader), first


class _Builder:
    """Plain data built from the parser's events as `_check_shape` walks them, so a fleet file is
    parsed once, in C, and not composed and constructed by ruamel in Python (most of the time of
    a big file). Each plain scalar is resolved by ruamel's own YAML 1.2 rules and constructor,
    once per distinct text; so the data equals `_plain(YAML(typ="safe").load(text))`."""

    def __init__(self) -> None:
        self.data: Any = None
        self.unusual = False
        self._stack: list[Any] = []  # open collections; a mapping's pending key beside it
        self._keys: list[Any] = []
        self._scalars: dict[str, Any] = {}
        self._documents = 0

    def fed(self, events: Iterable[Any]) -> Iterable[Any]:
        """`events`, each handed on first (the checks refuse what must not be built), then built."""
        for event in events:
            yield event
            if not self.unusual:
                try:
                    self._add(event)
                except _Unusual:
                    self.unusual = True

    def _scalar(self, text: str) -> Any:
        value = self._scalars.get(text, _MISSING)
        if value is _MISSING:
            resolver, constructor, first = _scalar_rules()
            if first and text and text[0] not in first:
                value = text
            else:
                from ruamel.yaml.nodes import ScalarNode

                tag = str(resolver.resolve(ScalarNode, text, (True, False)))
                if tag not in _SCALAR_TAGS:
                    raise _Unusual
                value = _plain(constructor.yaml_constructors[tag](constructor, ScalarNode(tag, text)))
            self._scalars[text] = value
        return value

    def _add(self, event: Any) -> None:
        kind = type(event)
        if kind is ScalarEvent:
            if event.anchor is not None or event.tag is not None:
                raise _Unusual
            self._put(self._scalar(event.value) if event.implicit[0] else event.value)
        elif kind is MappingStartEvent or kind is SequenceStartEvent:
            if event.anchor is not None or event.tag is not None:
                raise _Unusual
            self._stack.append({} if kind is MappingStartEvent else [])
            self._keys.append(_MISSING)
        elif kind is MappingEndEvent or kind is SequenceEndEvent:
            self._keys.pop()
            self._put(self._stack.pop())
        elif kind is DocumentStartEvent:
            self._documents += 1
            if self._documents > 1 or event.version is not None or event.tags:
                raise _Unusual
        elif kind is AliasEvent:
            raise _Unusual

    def _put(self, value: Any) -> None:
        if not self._stack:
            self.data = value
            return
        collection = self._stack[-1]
        if isinstance(collection, list):
            collection.append(value)
            return
        key = self._keys[-1]
        if key is _MISSING:
            if isinstance(value, (dict, list)):
                raise _Unusual  # a collection as a key
            self._keys[-1] = value
            return
        text = key if isinstance(key, str) else str(key)
        if text in collection:
            raise _Unusual  # a duplicate key: ruamel's loader names it
        collection[text] = value
        self._keys[-1] = _MISSING
