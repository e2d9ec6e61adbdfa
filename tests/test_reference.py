"""The reference cannot drift from the code: docs/reference/configuration.md,
docs/reference/commands.md and config.example.toml are what `agent reference` writes from the
settings models and the commands' --help, and every key says what it does."""

from __future__ import annotations

import tomllib
from pathlib import Path

from click.testing import CliRunner

from agent.cli.main import cli
from agent.cli.reference.command import stale
from agent.cli.reference.keys import tables

REPO = Path(__file__).resolve().parent.parent


def test_docs_and_example_are_what_the_code_writes() -> None:
    found = stale(REPO, cli)
    assert not found, (
        f"{', '.join(found)} disagree with the settings models or the commands' --help: "
        "run `agent reference` in the repository and commit what it writes"
    )


def test_every_key_has_a_description_and_an_environment_variable() -> None:
    keys = [(table, key) for table in tables() for key in table.keys]
    assert len(keys) > 150
    assert not [f"{t.path}.{k.name}" for t, k in keys if not k.description]
    page = (REPO / "docs/reference/configuration.md").read_text(encoding="utf-8")
    for table, key in keys:
        assert f"| `{key.name}` |" in page and f"`{table.env(key)}`" in page


def test_every_command_and_lazy_group_is_in_the_command_reference() -> None:
    page = (REPO / "docs/reference/commands.md").read_text(encoding="utf-8")
    assert "## agent schedules cancel\n" in page  # a lazily imported group's subcommand
    assert "## agent prompt show\n" in page
    assert "## agent reference\n" in page


def test_check_names_the_file_a_change_left_behind(tmp_path: Path) -> None:
    runner = CliRunner()
    written = runner.invoke(cli, ["reference", str(tmp_path)])
    assert written.exit_code == 0, written.output
    example = tomllib.loads((tmp_path / "config.example.toml").read_text(encoding="utf-8"))
    assert example["llm"]["model"] == ""
    assert runner.invoke(cli, ["reference", "--check", str(tmp_path)]).exit_code == 0
    page = tmp_path / "docs/reference/configuration.md"
    page.write_text(page.read_text().replace("LiteLLM model name", "Model"), encoding="utf-8")
    checked = runner.invoke(cli, ["reference", "--check", str(tmp_path)])
    assert checked.exit_code == 1
    assert "docs/reference/configuration.md: out of date; run `agent reference`" in checked.output
    assert "config.example.toml" not in checked.output
