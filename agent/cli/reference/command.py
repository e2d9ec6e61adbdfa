"""`agent reference`: write the reference pages and config.example.toml from the code, or
(--check) say which of them disagree with it."""

from __future__ import annotations

import sys
from pathlib import Path

import click


def pages(root: click.Group) -> dict[str, str]:
    """Each generated file's path in the repository, and the text the code gives it."""
    from agent.cli.reference.pages import commands_md, configuration_md, example_toml

    return {
        "docs/reference/configuration.md": configuration_md(),
        "docs/reference/commands.md": commands_md(root),
        "config.example.toml": example_toml(),
    }


def stale(repo: Path, root: click.Group) -> list[str]:
    """The generated files whose text differs from what the code gives them."""
    found = []
    for name, text in pages(root).items():
        path = repo / name
        if not path.exists() or path.read_text(encoding="utf-8") != text:
            found.append(name)
    return found


@click.command()
@click.option("--check", is_flag=True, help="Write nothing; exit 1 naming the files out of date.")
@click.argument(
    "repo", type=click.Path(file_okay=False, path_type=Path), default=".", required=False
)
@click.pass_context
def reference(ctx: click.Context, check: bool, repo: Path) -> None:
    """Write the configuration and command reference (docs/reference/) and config.example.toml
    from the code.

    REPO is the repository's folder (default: here). Run it after changing a settings model's
    key or docstring, or a command's help; tests/test_reference.py fails until then."""
    root = ctx.find_root().command
    assert isinstance(root, click.Group)
    if check:
        found = stale(repo, root)
        for name in found:
            click.echo(f"{name}: out of date; run `agent reference` to write it", err=True)
        sys.exit(1 if found else 0)
    for name, text in pages(root).items():
        path = repo / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text, encoding="utf-8")
        click.echo(f"wrote {name}")
