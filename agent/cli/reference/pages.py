"""The pages `agent reference` writes: docs/reference/configuration.md and config.example.toml
from the settings models (keys.py), docs/reference/commands.md from every command's --help."""

from __future__ import annotations

import click
from pydantic_core import PydanticUndefined

from agent.cli.reference.keys import Key, Table, tables, toml_value

GENERATED = "agent reference"  # the command that writes them, named in each page's head
WIDTH = 78  # --help as an 80-column terminal shows it (click leaves two columns), anywhere
RUNNABLE = "<!-- runnable -->"  # the next ```sh block runs in tests/test_doc_commands.py
RUN_HELP = ("agent", "agent prompt show")  # their --help, run and compared

EXAMPLE_HEAD = f"""\
# pinclaw configuration. Every key is shown with its default value.
# Found at: --config FILE, else $PINCLAW_CONFIG, else ~/.pinclaw/config.toml
# ($PINCLAW_HOME moves it).
# Any key can be overridden by the environment: PINCLAW_<SECTION>__<KEY>, e.g. PINCLAW_LLM__MODEL.
# Secrets (API keys, bot tokens) are read from the environment only, never from this file.
# Written by `{GENERATED}` from the settings models: edit their docstrings, not this file.
"""


def configuration_md() -> str:
    """Every table and key: type, default, environment variable, description."""
    out = [
        "# Configuration reference\n",
        f"Written by `{GENERATED}` from the settings models; do not edit by hand. A key is set",
        "in `config.toml` (see `config.example.toml`) or by its environment variable, which wins;",
        "secrets are read from the environment only. `NAME` is a name you pick.\n",
    ]
    for table in tables():
        out.append(f"## [{table.path}]\n")
        if table.description:
            out.append(table.description + "\n")
        if not table.keys:
            continue
        out += [
            "| Key | Type | Default | Environment variable | Description |",
            "|---|---|---|---|---|",
        ]
        for key in table.keys:
            default = "(environment only)" if key.secret else _code(toml_value(key.default))
            if key.default is PydanticUndefined:
                default = "(required)"
            cells = [_code(key.name), key.type, default, _code(table.env(key)), key.description]
            out.append("| " + " | ".join(_cell(cell) for cell in cells) + " |")
        out.append("")
    return "\n".join(out).rstrip() + "\n"


def example_toml() -> str:
    """config.example.toml: each key with its default and description; secrets and the tables
    one makes per name shown commented."""
    out = [EXAMPLE_HEAD.rstrip()]
    for table in tables():
        out.append("")
        if table.named:
            out.append(f"# [{table.path}]" + (f"  # {table.description}" * bool(table.description)))
        else:
            out.append(f"[{table.path}]")
        out += [_example_line(table, key) for key in table.keys]
    return "\n".join(out) + "\n"


def _example_line(table: Table, key: Key) -> str:
    value = key.example if table.named and key.example is not PydanticUndefined else key.default
    written = toml_value(value)
    assign = key.name if key.secret or not written else f"{key.name} = {written}"
    if table.named or key.secret or not written:
        assign = "# " + assign
    about = key.description
    if key.secret and table.env(key) not in about:  # where to put it instead
        about += f"; set {table.env(key)}"
    if not about:
        return assign
    return f"{assign:<27} # {about}" if len(assign) < 27 else f"{assign}  # {about}"


def commands_md(root: click.Group) -> str:
    """Every command's and subcommand's --help, the lazily imported groups' too."""
    out = [
        "# Command reference\n",
        f"Written by `{GENERATED}` from each command's own `--help`, as an 80-column terminal",
        "shows it; do not edit by hand. The blocks marked runnable are run by",
        "tests/test_doc_commands.py, their output compared. A first look at what the agent",
        "would send the model, with `PINCLAW_LLM__MODEL` set (no model is called):\n",
        RUNNABLE,
        "```sh",
        "agent prompt show --stats",
        "```\n",
    ]
    context = click.Context(root, info_name="agent", terminal_width=WIDTH, **root.context_settings)
    _command(root, context, out)
    return "\n".join(out).rstrip() + "\n"


def _command(command: click.Command, context: click.Context, out: list[str]) -> None:
    path = context.command_path
    out += [f"## {path}\n", *[RUNNABLE] * (path in RUN_HELP), "```sh", f"{path} --help", "```\n"]
    out += ["```text", command.get_help(context), "```\n"]
    if isinstance(command, click.Group):
        for name in command.list_commands(context):
            sub = command.get_command(context, name)
            if sub is not None and not sub.hidden:
                inner = click.Context(sub, info_name=name, parent=context, **sub.context_settings)
                _command(sub, inner, out)


def _code(text: str) -> str:
    return f"`{text}`" if text else ""


def _cell(text: str) -> str:
    """Markdown's table: a | would end the cell, a <word> would be read as HTML."""
    return text.replace("|", "\\|").replace("<", "&lt;")
