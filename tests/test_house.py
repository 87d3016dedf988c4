"""The house's import rules, checked on the source: no module takes another module's private names."""

from __future__ import annotations

import ast

from tests.conftest import ROOT


def test_no_module_imports_another_modules_private_names():
    taken = []
    for path in sorted((ROOT / "provisioner").rglob("*.py")):
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, ast.ImportFrom) and (node.module or "").startswith("provisioner"):
                taken += [
                    f"{path.relative_to(ROOT)}: {node.module}.{alias.name}"
                    for alias in node.names
                    if alias.name.startswith("_") and not alias.name.startswith("__")
                ]
    assert taken == []
