"""What the install weighs, and what each dependency adds to it.

Run with the Python of a venv made by README's first command (`.venv/bin/python
bench/install_size.py`): it reads that venv's installed distributions, follows their
requirements (markers and extras evaluated for this interpreter) from pinclaw's own, and says
for each of pinclaw's dependencies, and for a few packages that others bring, how many MiB
would go if it went (its own files and whatever only it needs). The total is the venv's folder
as `du` counts it, pip and setuptools included, since that is what a newcomer's disk holds.
"""

from __future__ import annotations

import argparse
import subprocess
import sys
from collections.abc import Iterable
from importlib.metadata import Distribution, distributions
from pathlib import Path

from packaging.markers import default_environment
from packaging.requirements import Requirement
from packaging.utils import canonicalize_name

# Brought by others, asked about by name (issue 35): LiteLLM's AWS client and the page parser.
ALSO = {
    "boto3 (via litellm)": ("boto3",),
    "web pages (bs4, markdownify)": ("beautifulsoup4", "markdownify"),
    "web pages (trafilatura, before)": ("trafilatura", "lxml-html-clean"),
}
MIB = 1024 * 1024


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--top", type=int, default=12, help="how many rows of dependencies")
    options = parser.parse_args()
    installed = {canonicalize_name(d.metadata["Name"]): d for d in distributions()}
    if "pinclaw" not in installed:
        sys.exit("pinclaw is not installed in this Python")
    sizes = {name: _size(dist) for name, dist in installed.items()}
    everything = _reach(installed, removed=set())
    roots = {name for name, _ in _requires(installed["pinclaw"], set())} & everything
    total = _folder_mib(Path(sys.prefix))
    kept = sum(sizes[name] for name in everything) / MIB
    print(f"the venv: {total:.0f} MiB as du counts it; pinclaw's packages {kept:.0f} MiB")
    print(f"in {len(everything)} distributions (file sizes; du adds pip, setuptools and each")
    print("file's rounding up to whole blocks)\n")
    rows = [(name, (name,)) for name in roots]
    rows += [(label, names) for label, names in ALSO.items() if set(names) & everything]
    costs = sorted(
        ((label, _cost(installed, sizes, everything, set(names))) for label, names in rows),
        key=lambda row: -row[1],
    )
    print(f"{'dependency':34} {'MiB that would go':>18}")
    shown = costs[: options.top]
    for label, cost in shown + [c for c in costs if c[0] in ALSO and c not in shown]:
        print(f"{label:34} {cost / MIB:18.1f}")


def _requires(dist: Distribution, extras: set[str]) -> Iterable[tuple[str, set[str]]]:
    """What `dist`, installed with `extras`, asks for: names and the extras asked of each."""
    environment = default_environment()
    for line in dist.requires or []:
        requirement = Requirement(line)
        marker = requirement.marker
        if marker is None or any(
            marker.evaluate({**environment, "extra": extra}) for extra in ("", *extras)
        ):
            yield canonicalize_name(requirement.name), set(requirement.extras)


def _reach(installed: dict[str, Distribution], removed: set[str]) -> set[str]:
    """The installed distributions pinclaw needs, with `removed` (and what only they bring)
    taken out."""
    asked: dict[str, set[str]] = {}
    todo: list[tuple[str, set[str]]] = [("pinclaw", set())]
    while todo:
        name, extras = todo.pop()
        if name in removed or name not in installed:
            continue
        known = asked.get(name)
        if known is not None and extras <= known:
            continue
        asked[name] = (known or set()) | extras
        todo.extend(_requires(installed[name], asked[name]))
    return set(asked)


def _cost(
    installed: dict[str, Distribution], sizes: dict[str, int], everything: set[str], names: set[str]
) -> int:
    """The bytes that go with `names`: theirs and what nothing else needs."""
    left = _reach(installed, removed={canonicalize_name(n) for n in names})
    return sum(sizes[name] for name in everything - left)


def _size(dist: Distribution) -> int:
    """The bytes of a distribution's files on disk (pip's RECORD lists the bytecode it
    compiled too)."""
    paths = {Path(str(dist.locate_file(file))) for file in dist.files or []}
    return sum(path.stat().st_size for path in paths if path.is_file())


def _folder_mib(folder: Path) -> float:
    du = subprocess.run(["du", "-sk", str(folder)], capture_output=True, text=True, check=True)
    return int(du.stdout.split()[0]) / 1024


if __name__ == "__main__":
    main()
