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


def _module_of(path) -> str:
    parts = path.relative_to(ROOT).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def test_no_import_cycle():
    """Every import among the tool's modules, late and type-checking ones included, runs one way."""
    paths = {_module_of(path): path for path in (ROOT / "provisioner").rglob("*.py")}
    graph = {}
    for module, path in paths.items():
        targets = set()
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, ast.ImportFrom) and node.level == 0 and (node.module or "") in paths:
                named = {f"{node.module}.{alias.name}" for alias in node.names}
                targets |= (named & paths.keys()) or {node.module}
            elif isinstance(node, ast.Import):
                targets |= {alias.name for alias in node.names if alias.name in paths}
        graph[module] = targets - {module}
    cycles = []
    for start in sorted(graph):
        seen, stack = set(), [(start, (start,))]
        while stack:
            module, trail = stack.pop()
            for target in graph[module]:
                if target == start:
                    cycles.append(" -> ".join((*trail, start)))
                elif target not in seen and target > start:  # each cycle once, from its least module
                    seen.add(target)
                    stack.append((target, (*trail, target)))
    assert cycles == []


def test_the_shapes_everyone_shares_import_no_driver():
    """ClusterRef, Target and PoolState are made by the fleet, the compiler, plan and sync alike."""
    neutral = ["clusters.py", "pools.py", "errors.py", "sdks.py"]
    taken = [
        f"{name}: {module}"
        for name in neutral
        for module in _imports(ROOT / "provisioner" / name)
        if module.startswith(("provisioner.drivers", "provisioner.sandbox"))
    ]
    assert taken == []
