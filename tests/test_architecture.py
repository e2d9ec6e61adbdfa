"""The house rules of docs/architecture.md that a machine can check: no import circles,
imports flow down the layers, and no source file grows past 400 lines."""

from __future__ import annotations

import ast
import re
from collections.abc import Iterator
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parent.parent
PACKAGES = ("agent", "channels", "tools")
MAX_LINES = 400

# Who may import whom; a module matches the longest prefix listed. Mirrors the picture in
# docs/architecture.md and each package's __init__ docstring. agent/'s floors, bottom up: each
# may import the core and the floors below it.
AGENT_CORE = (
    "agent.home",
    "agent.config",
    "agent.workspace",
    "agent.security",
    "agent.collector",
    "agent.http.config",
    "agent.settings",
    "channels",
    "tools",
)
AGENT_FLOORS = (
    "agent.model",
    "agent.prompt",
    "agent.durable",
    "agent.conversation",
    "agent.turns",
    "agent.runtime",
    "agent.proactive",
    "agent.app",
    "agent.http",
    "agent.daemon",
    "agent.cli",
)
TOOLS_CORE = (
    "tools.base",
    "tools.tool_groups",
    "tools.config",
    "tools.paths",
    "tools.policy",
    "tools.files",
    "tools.sqlite_thread",
    "tools.taint",
    "tools.background",
)
TOOLS_CORE_ALL = (*TOOLS_CORE, "tools.boundaries")
MAY_IMPORT: dict[str, tuple[str, ...]] = {
    "channels": (
        "channels.base",
        "channels.capabilities",
        "channels.config",
        "channels.kind",
        "channels.registry",
        "channels.text",
    ),
    # One line per channel: its kind (channels/<name>/kind.py, light: tests/test_channel_names.py)
    "channels.registry": ("channels",),
    "channels.approvals": ("channels.base", "channels.capabilities"),
    "channels.telegram": ("channels.telegram", "channels"),
    "channels.discord": ("channels.discord", "channels"),
    "tools": TOOLS_CORE_ALL,
    "tools.sandbox": ("tools.sandbox", *TOOLS_CORE_ALL),
    "tools.shell": ("tools.shell", "tools.sandbox", *TOOLS_CORE_ALL),
    "tools.board": ("tools.board", *TOOLS_CORE_ALL),
    "tools.memory": ("tools.memory", *TOOLS_CORE_ALL),
    "tools.proactive": ("tools.proactive", "tools.board", *TOOLS_CORE_ALL),
    "tools.skills": ("tools.skills", "tools.shell", *TOOLS_CORE_ALL),
    "tools.mcp": ("tools.mcp", "tools.sandbox", *TOOLS_CORE_ALL),
    "tools.web": ("tools.web", *TOOLS_CORE_ALL),
    "agent.home": (),
    "agent.config": (
        "agent.home",
        "agent.http.config",
        "agent.security",  # make_scrubber: the settings' secrets taken out of any text
        "agent.settings",
        "channels.config",
        "tools.config",
        "tools.mcp.config",
    ),
    "agent.http.config": (),  # [http]'s settings model: light, core
    "agent.settings": (),  # the agent's own sections of config.toml: light, core
    # tools.boundaries: the inbox/ folder init makes is the one it splits per chat
    "agent.workspace": ("agent.home", "tools.paths", "tools.boundaries"),
    "agent.security": (),
    "agent.collector": (),
    **{floor: (*AGENT_CORE, *AGENT_FLOORS[: i + 1]) for i, floor in enumerate(AGENT_FLOORS)},
    "agent.cli": ("agent", "channels", "tools"),  # the top floor
    # The warm start: its folder and its start are light (stdlib; the commands use them), its
    # client (before click) and its process (a fork runs the commands) sit above the commands.
    "agent.warm": ("agent.warm.place",),
    "agent.warm.client": ("agent.cli.local_client", "agent.warm.place"),
    "agent.warm.server": ("agent", "channels", "tools"),  # above the commands it runs
    "agent.warm.__main__": ("agent.warm.server",),
    "agent.__main__": ("agent.cli", "agent.warm.client"),
    "agent": (),  # agent/__init__.py
}


def module_name(path: Path) -> str:
    parts = path.relative_to(REPO).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def source_files() -> list[Path]:
    return sorted(p for package in PACKAGES for p in (REPO / package).rglob("*.py"))


MODULES = {module_name(path): path for path in source_files()}


def imports_of(module: str) -> Iterator[str]:
    """Every module of ours that `module` imports anywhere in the file: at the top, inside a
    function or under TYPE_CHECKING alike (a lazy import is still a dependency)."""
    path = MODULES[module]
    package = module if path.name == "__init__.py" else module.rpartition(".")[0]
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.Import):
            names = [alias.name for alias in node.names]
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                anchor = package.split(".")[: len(package.split(".")) - node.level + 1]
                base = ".".join([*anchor, *([base] if base else [])])
            names = [base, *(f"{base}.{alias.name}" for alias in node.names)]
        else:
            continue
        yield from (name for name in names if name in MODULES and name != module)


GRAPH = {module: sorted(set(imports_of(module))) for module in MODULES}


def find_cycle() -> list[str] | None:
    """One import circle as a path a -> b -> ... -> a, or None (depth-first search)."""
    state: dict[str, int] = {}  # 1: on the current path, 2: done
    path: list[str] = []

    def visit(module: str) -> list[str] | None:
        state[module] = 1
        path.append(module)
        for target in GRAPH[module]:
            if state.get(target) == 1:
                return [*path[path.index(target) :], target]
            if target not in state and (found := visit(target)):
                return found
        path.pop()
        state[module] = 2
        return None

    for module in sorted(GRAPH):
        if module not in state and (found := visit(module)):
            return found
    return None


def test_no_import_circle_between_files() -> None:
    cycle = find_cycle()
    assert cycle is None, "import circle: " + " -> ".join(cycle or [])


def test_the_cycle_finder_finds_a_planted_circle(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(GRAPH, "tools.base", [*GRAPH["tools.base"], "tools.shell.shell_tool"])
    assert find_cycle() == ["tools.base", "tools.shell.shell_tool", "tools.base"]


# state.db has one door (docs/architecture.md): SQLite is spoken only below it.
SPEAKS_SQL = ("agent.durable", "tools.memory", "tools.sqlite_thread")
SQL_TEXT = re.compile(r"\s*(SELECT|INSERT|UPDATE|DELETE|REPLACE|PRAGMA|CREATE|ALTER|DROP)\s")
RUNS_SQL = ("execute", "executescript", "executemany")


def sql_spoken(path: Path) -> list[str]:
    """Where a file imports sqlite3, hands a string to .execute/.executescript/.executemany,
    or holds SQL text: "line N: what", in line order."""
    found: list[tuple[int, str]] = []
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.Import | ast.ImportFrom):
            if isinstance(node, ast.Import):
                names = [alias.name for alias in node.names]
            else:
                names = [] if node.level else [node.module or ""]
            if any(name.split(".")[0] == "sqlite3" for name in names):
                found.append((node.lineno, "imports sqlite3"))
        elif (
            isinstance(node, ast.Call)
            and isinstance(node.func, ast.Attribute)
            and node.func.attr in RUNS_SQL
            and node.args
            and isinstance(node.args[0], ast.Constant | ast.JoinedStr)
        ):
            found.append((node.lineno, f".{node.func.attr}() of a string"))
        elif (
            isinstance(node, ast.Constant)
            and isinstance(node.value, str)
            and SQL_TEXT.match(node.value)
        ):
            found.append((node.lineno, f"SQL text {node.value[:30]!r}"))
    return [f"line {line}: {what}" for line, what in sorted(found)]


def sql_outside_the_door(modules: dict[str, Path]) -> dict[str, list[str]]:
    return {
        module: spoken
        for module, path in sorted(modules.items())
        if not any(module == a or module.startswith(a + ".") for a in SPEAKS_SQL)
        and (spoken := sql_spoken(path))
    }


def test_only_the_durable_layer_speaks_sql() -> None:
    """No sqlite3 and no SQL outside agent/durable/ and the memory store: everything else
    reaches state.db through StateDB and the durable modules' named methods."""
    assert not sql_outside_the_door(MODULES)


def test_the_sql_finder_finds_planted_sql(tmp_path: Path) -> None:
    planted = tmp_path / "planted.py"
    planted.write_text(
        "import sqlite3\n"
        "def f(conn, runner, argv):\n"
        "    runner.execute(argv)\n"
        "    conn.execute(f'select * from {argv}')\n"
        "    return 'DELETE FROM usage'\n"
    )
    planted_in = {"agent.runtime.planted": planted, "agent.durable.planted": planted}
    assert sql_outside_the_door(planted_in) == {
        "agent.runtime.planted": [
            "line 1: imports sqlite3",
            "line 4: .execute() of a string",
            "line 5: SQL text 'DELETE FROM usage'",
        ]
    }


def layer_of(module: str) -> str:
    return max(
        (key for key in MAY_IMPORT if module == key or module.startswith(key + ".")), key=len
    )


@pytest.mark.parametrize("module", sorted(MODULES))
def test_imports_flow_down_the_layers(module: str) -> None:
    allowed = MAY_IMPORT[layer_of(module)]
    upward = [
        target
        for target in GRAPH[module]
        if not any(target == a or target.startswith(a + ".") for a in allowed)
        and not (target == "agent" and module.startswith("agent."))  # __version__ only
    ]
    assert not upward, f"{module} imports {upward}; its layer may import only {allowed}"


def test_packages_say_what_they_hold_and_import_nothing() -> None:
    for module, path in MODULES.items():
        if path.name != "__init__.py" or module == "agent":
            continue
        tree = ast.parse(path.read_text(encoding="utf-8"))
        assert ast.get_docstring(tree), f"{path.relative_to(REPO)} has no docstring"
        assert not [n for n in tree.body if isinstance(n, ast.Import | ast.ImportFrom)], path


def test_agent_keeps_at_most_eight_modules_at_the_top() -> None:
    top = sorted(p.name for p in (REPO / "agent").glob("*.py"))
    assert len(top) <= 8, top


@pytest.mark.parametrize("path", source_files(), ids=lambda p: str(p.relative_to(REPO)))
def test_no_source_file_over_400_lines(path: Path) -> None:
    lines = len(path.read_text(encoding="utf-8").splitlines())
    assert lines <= MAX_LINES, f"{path.relative_to(REPO)}: {lines} lines; split it by job"


MAX_MODULES_PER_FOLDER = 12
MAX_RUNTIME_LINES = 300  # agent/runtime/: parts by job, not a hub (issue 37)


def test_no_folder_holds_more_than_twelve_modules() -> None:
    """Past a dozen modules a folder is a list, not a room: give its jobs rooms of their own."""
    folders = {p.parent for p in source_files()}
    crowded = {
        str(folder.relative_to(REPO)): count
        for folder in folders
        if (count := sum(1 for p in folder.glob("*.py") if p.name != "__init__.py"))
        > MAX_MODULES_PER_FOLDER
    }
    assert not crowded


def test_no_runtime_file_over_300_lines() -> None:
    long = {
        str(path.relative_to(REPO)): lines
        for path in (REPO / "agent" / "runtime").rglob("*.py")
        if (lines := len(path.read_text(encoding="utf-8").splitlines())) > MAX_RUNTIME_LINES
    }
    assert not long


def test_test_doubles_stay_under_500_lines() -> None:
    big = {
        p.name: n
        for p in (REPO / "tests" / "fakes").glob("*.py")
        if (n := len(p.read_text(encoding="utf-8").splitlines())) > 500
    }
    assert not big, big


def test_every_package_is_installed() -> None:
    """A folder pyproject.toml does not list is missing from a non-editable install."""
    import tomllib

    listed = set(
        tomllib.loads((REPO / "pyproject.toml").read_text())["tool"]["setuptools"]["packages"]
    )
    found = {module for module, path in MODULES.items() if path.name == "__init__.py"}
    assert found <= listed, sorted(found - listed)


def test_no_source_file_keeps_its_layout_with_fmt_skip() -> None:
    """The 400-line rule is met by splitting, not by packing lines ruff would lay out."""
    packed = [
        f"{path.relative_to(REPO)}:{number}"
        for path in source_files()
        for number, line in enumerate(path.read_text(encoding="utf-8").splitlines(), 1)
        if line.rstrip().endswith("# fmt: skip")
    ]
    assert not packed, packed
