"""YAML documents that remember where each value came from, and errors that say so.

A `Diagnostic` reads `fleet.yaml:14: clusters[azure-ml].pools[a100mig7].gpu.mig: <message>`:
file, line, the field by a path that names list items by their `name`, and what is wrong.
"""

from __future__ import annotations

import functools
import re
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from ruamel.yaml import YAML
from ruamel.yaml.comments import CommentedMap, CommentedSeq
from ruamel.yaml.error import MarkedYAMLError

from provisioner.errors import FleetError

Loc = tuple[str | int, ...]


@dataclass(frozen=True, order=True)
class Diagnostic:
    file: str
    line: int | None
    path: str
    message: str

    def __str__(self) -> str:
        where = f"{self.file}:{self.line}" if self.line else self.file
        return f"{where}: {self.path}: {self.message}" if self.path else f"{where}: {self.message}"


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
        file = str(path)
        try:
            text = Path(path).read_text(encoding="utf-8")
        except OSError as exc:
            raise FleetError([Diagnostic(file, None, "", f"cannot read: {exc.strerror}")]) from exc
        except UnicodeDecodeError as exc:
            raise FleetError([Diagnostic(file, None, "", "is not UTF-8 text")]) from exc
        return cls.parse(text, file)

    @classmethod
    def parse(cls, text: str, file: str) -> SourceDocument:
        try:
            data = YAML(typ="safe").load(text)
        except MarkedYAMLError:
            # libyaml scans by YAML 1.1 and refuses some 1.2 documents (an ARN in a flow
            # mapping): the pure-Python round-trip parser is the judge.
            document = cls(file, text, None)
            try:
                document.data = _plain(document._tree)
            except MarkedYAMLError as exc:
                mark = exc.problem_mark or exc.context_mark
                line = mark.line + 1 if mark else None
                problem = " ".join(filter(None, [exc.context, exc.problem])) or "invalid YAML"
                raise FleetError([Diagnostic(file, line, "", f"invalid YAML: {problem}")]) from exc
            return document
        return cls(file, text, _plain(data))

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
        return f"[{name}]" if isinstance(name, str) and name else f"[{step}]"
    if not _PLAIN_KEY.match(step):
        return f'["{step}"]'  # label keys such as nvidia.com/gpu.product
    return step if first else f".{step}"


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
