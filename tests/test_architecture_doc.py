"""docs/architecture.md stays true: every path it names in backticks is in the tree, and
every `path/module.symbol` it names is defined in that module. A rename that leaves the
design page behind fails here instead of misleading the next engineer."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parent.parent
DOC = (REPO / "docs" / "architecture.md").read_text(encoding="utf-8")
TOP = ("agent", "tools", "channels", "tests", "bench", "skills", "workspace", "docs")
NAMED = sorted(set(re.findall(rf"`((?:{'|'.join(TOP)})/[\w./-]+)`", DOC)))


def test_the_page_names_paths_at_all() -> None:
    assert len(NAMED) > 100


@pytest.mark.parametrize("named", NAMED)
def test_each_named_path_or_symbol_exists(named: str) -> None:
    path = REPO / named.rstrip("/")
    if path.exists():
        return
    module, _, symbol = named.rpartition(".")
    source = REPO / f"{module}.py"
    assert source.is_file(), f"docs/architecture.md names {named}: no such file or module"
    defined = rf"^\s*(?:async def|def|class) {re.escape(symbol)}\b|^{re.escape(symbol)}\s*[:=]"
    assert re.search(defined, source.read_text(encoding="utf-8"), re.MULTILINE), (
        f"docs/architecture.md names {named}: {module}.py defines no {symbol}"
    )
