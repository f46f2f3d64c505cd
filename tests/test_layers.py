"""The package's layering, read from the source: what each folder may import, no import cycle
between modules, no ``sys.path`` edits, and no package path into ``tests/`` or ``../shared``."""

from __future__ import annotations

import ast
import importlib
import re
import subprocess
import sys
import tempfile
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
# folder on disk → the package it installs as
PACKAGES = {
    "schemas": "structgen.schemas",
    "fsm": "structgen.fsm",
    "kernels": "structgen.kernels",
    "structgen": "structgen",
}
# layer → the layers it must never import (the pipeline reads schemas → fsm → kernels → engine)
FORBIDDEN = {
    "structgen.schemas": ("structgen.fsm", "structgen.kernels", "structgen.runtime", "structgen.engine", "structgen.models"),
    "structgen.fsm": ("structgen.kernels", "structgen.runtime", "structgen.engine", "structgen.models"),
    "structgen.kernels": ("structgen.schemas", "structgen.fsm", "structgen.runtime", "structgen.engine", "structgen.models"),
    "structgen.models": ("structgen.engine",),  # a model calls the runtime's attention backend
    "structgen.runtime": ("structgen.engine", "structgen.models"),
    "structgen.engine": (),
    "structgen.server": ("structgen.bench", "structgen.demo"),
    "structgen.bench": ("structgen.server",),
}
TOP = ("structgen.bench", "structgen.demo", "structgen.server", "structgen.cli", "structgen.api")
LOWER = ("structgen.schemas", "structgen.fsm", "structgen.kernels", "structgen.models", "structgen.runtime", "structgen.engine")


def _modules() -> dict[str, Path]:
    out = {}
    for folder, package in PACKAGES.items():
        for path in (ROOT / folder).rglob("*.py"):
            rel = path.relative_to(ROOT / folder).with_suffix("")
            parts = [p for p in rel.parts if p != "__init__"]
            name = ".".join([package, *parts])
            if folder == "structgen" and parts and parts[0] in ("fsm", "schemas", "kernels"):
                continue  # links of a dev checkout, if any
            out[name] = path
    return out


def _imports(name: str, path: Path) -> list[tuple[str, bool]]:
    """``(module, at_module_level)`` for every import in ``path``, relative ones resolved."""
    tree = ast.parse(path.read_text(), str(path))
    is_pkg = path.name == "__init__.py"
    base = name.split(".") if is_pkg else name.split(".")[:-1]
    out = []
    top_level = set(map(id, tree.body))
    for node in ast.walk(tree):
        at_top = id(node) in top_level
        if isinstance(node, ast.Import):
            out += [(a.name, at_top) for a in node.names]
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                mod = ".".join(base[: len(base) - node.level + 1] + ([node.module] if node.module else []))
            else:
                mod = node.module or ""
            out.append((mod, at_top))
            out += [(f"{mod}.{a.name}", at_top) for a in node.names]
    return out


def _within(mod: str, prefixes: tuple[str, ...]) -> bool:
    return any(mod == p or mod.startswith(p + ".") for p in prefixes)


def test_layers_import_only_downwards() -> None:
    modules = _modules()
    bad = []
    for name, path in modules.items():
        for mod, _top in _imports(name, path):
            for layer, forbidden in FORBIDDEN.items():
                if _within(name, (layer,)) and _within(mod, forbidden):
                    bad.append(f"{name} imports {mod}")
            if _within(name, LOWER) and _within(mod, TOP):
                bad.append(f"{name} imports {mod}")
    assert not bad, "\n".join(sorted(set(bad)))


def test_no_import_cycle_between_modules() -> None:
    """Module-level imports form no cycle (imports inside functions are deferred, so they may
    point upwards only where the rules above allow)."""
    modules = _modules()
    graph: dict[str, set[str]] = {n: set() for n in modules}
    for name, path in modules.items():
        for mod, at_top in _imports(name, path):
            if at_top and mod in modules and mod != name and not name.startswith(mod + "."):
                graph[name].add(mod)
    state: dict[str, int] = {}
    stack: list[str] = []

    def visit(n: str) -> None:
        state[n] = 1
        stack.append(n)
        for m in sorted(graph[n]):
            if state.get(m) == 1:
                cycle = stack[stack.index(m) :] + [m]
                pytest.fail("import cycle: " + " → ".join(cycle))
            if m not in state:
                visit(m)
        stack.pop()
        state[n] = 2

    for n in sorted(graph):
        if n not in state:
            visit(n)


@pytest.mark.parametrize("folder", ["structgen", "fsm", "schemas", "kernels", "benchmarks", "tools"])
def test_no_sys_path_edits_or_paths_outside_the_install(folder: str) -> None:
    bad = []
    for path in (ROOT / folder).rglob("*.py"):
        text = path.read_text()
        if re.search(r"sys\.path\.(insert|append)|sys\.path\s*\+?=", text):
            bad.append(f"{path.relative_to(ROOT)}: edits sys.path")
        if folder in PACKAGES and re.search(r'shared/fixtures|"shared" / "fixtures"|tests/fixtures|"tests" / "fixtures"', text):
            bad.append(f"{path.relative_to(ROOT)}: a path into ../shared or tests/")
    assert not bad, "\n".join(bad)


def test_package_faces_only_re_export() -> None:
    """``__init__.py`` files hold a docstring, imports and ``__all__``: no logic.  The top
    package's face re-exports on first use (a ``TYPE_CHECKING`` block of imports, the name →
    module table, and the module ``__getattr__`` / ``__dir__`` of PEP 562), so that a worker
    process importing ``structgen.fsm`` does not load the engine."""
    lazy_face = ROOT / "structgen" / "__init__.py"
    for folder in PACKAGES:
        for path in (ROOT / folder).rglob("__init__.py"):
            tree = ast.parse(path.read_text())
            for node in tree.body:
                ok = isinstance(node, (ast.Import, ast.ImportFrom)) or (isinstance(node, ast.Expr) and isinstance(node.value, ast.Constant))
                names = {"__all__", "__version__"} | ({"_EXPORTS"} if path == lazy_face else set())
                ok = ok or (isinstance(node, (ast.Assign, ast.AugAssign)) and _names(node) <= names)
                ok = ok or (path == lazy_face and _lazy_re_export(node))
                assert ok, f"{path.relative_to(ROOT)}:{node.lineno}: {type(node).__name__} in a package face"


def _lazy_re_export(node: ast.stmt) -> bool:
    """A statement of PEP 562's lazy re-export: ``if TYPE_CHECKING:`` imports, or the module's
    ``__getattr__`` / ``__dir__``."""
    if isinstance(node, ast.If) and isinstance(node.test, ast.Name) and node.test.id == "TYPE_CHECKING":
        return all(isinstance(n, ast.ImportFrom) for n in node.body) and not node.orelse
    return isinstance(node, ast.FunctionDef) and node.name in {"__getattr__", "__dir__"}


def test_the_top_package_re_exports_lazily() -> None:
    """Every name of ``structgen.__all__`` resolves to the object its module defines, and a
    process that imports the compile layer alone (a compile or row worker) loads neither the
    engine nor torch."""
    import structgen

    assert set(structgen.__all__) == set(structgen._EXPORTS)
    for name in structgen.__all__:
        module = importlib.import_module(structgen._EXPORTS[name])
        assert getattr(structgen, name) is getattr(module, name), name
    with pytest.raises(AttributeError, match="no attribute 'nope'"):
        _ = structgen.nope  # type: ignore[attr-defined]
    code = (
        "import sys, structgen.fsm.compile_process, structgen.fsm.row_workers\n"
        "print(sorted(m for m in ('torch', 'structgen.engine', 'structgen.api') if m in sys.modules))"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True, cwd=tempfile.gettempdir())
    assert out.stdout.strip() == "[]", out.stdout


def _names(node: ast.Assign | ast.AugAssign) -> set[str]:
    targets = node.targets if isinstance(node, ast.Assign) else [node.target]
    return {t.id for t in targets if isinstance(t, ast.Name)}


def test_the_type_checker_sees_the_installed_package_layout() -> None:
    """``mypy`` checks ``.mypy/structgen``: links to every module and package of ``structgen/``
    and to the packages installed under it from top-level folders, so that an import of
    ``structgen.fsm`` from the engine resolves (without them it would type as ``Any``)."""
    tree = ROOT / ".mypy" / "structgen"
    want = {p.name: p for p in (ROOT / "structgen").iterdir() if p.suffix == ".py" or p.name == "py.typed" or (p / "__init__.py").is_file()}
    want.update({name: ROOT / name for name in ("fsm", "schemas", "kernels")})
    got = {p.name: p for p in tree.iterdir()}
    assert sorted(got) == sorted(want), "add or remove the links in .mypy/structgen"
    for name, link in got.items():
        assert link.is_symlink() and not Path(link.readlink()).is_absolute(), f"{name}: a relative link"
        assert link.resolve() == want[name].resolve(), f"{name} points at {link.resolve()}"
