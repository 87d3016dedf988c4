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


def _imports(path) -> list[str]:
    """Every module `path` imports, type-checking-only imports included."""
    found = []
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
            found.append(node.module)
        elif isinstance(node, ast.Import):
            found += [alias.name for alias in node.names]
    return found


def test_the_sandbox_imports_nothing_of_the_tool_not_even_for_type_checking():
    """The emulators are oracles: engine, wire, serving, the server and every cloud's emulator."""
    outside = [
        f"{path.relative_to(ROOT)}: {module}"
        for path in sorted((ROOT / "provisioner" / "sandbox").rglob("*.py"))
        for module in _imports(path)
        if (module == "provisioner" or module.startswith("provisioner."))
        and not module.startswith("provisioner.sandbox")
    ]
    assert outside == []


def test_drivers_import_nothing_of_the_sandbox():
    """The tool reads a sandbox's addresses where it makes drivers; drivers know no emulator."""
    taken = [
        f"{path.relative_to(ROOT)}: {module}"
        for path in sorted((ROOT / "provisioner" / "drivers").rglob("*.py"))
        for module in _imports(path)
        if module.startswith("provisioner.sandbox")
    ]
    assert taken == []
