"""`agent http keys add PERSON | list | revoke ID`: the OpenAI-compatible API's bearer keys,
kept in agent.env (agent/http/api_keys.py), each for a `[people]` name. A running daemon
reads agent.env again when it changes, so a key works, or stops working, within a second.
The key is printed once, when it is made; `list` shows ids and people, never keys.
"""

from __future__ import annotations

import sys

import click


@click.group()
def http() -> None:
    """Manage the keys of the HTTP API (OpenAI-compatible), kept in agent.env."""


@http.group()
def keys() -> None:
    """Add, list and revoke the API's bearer keys."""


@keys.command()
@click.argument("person")
@click.pass_context
def add(ctx: click.Context, person: str) -> None:
    """A new key for PERSON, a name in [people]: their turns, scopes and budget."""
    from agent.cli.setup.files import store_env
    from agent.home import ENV_FILE_NAME
    from agent.http.api_keys import new_key

    settings = ctx.obj["load"](ctx)
    if person not in settings.people:
        names = ", ".join(settings.people) or "none"
        click.echo(f"{person!r} is not in [people] (there: {names}); add it first", err=True)
        sys.exit(2)
    made, token = new_key(person)
    store_env(settings.home / ENV_FILE_NAME, {made.variable: token})
    click.echo(token)
    click.echo(
        f"key {made.id} for {person}, in agent.env as {made.variable}; shown only now", err=True
    )


@keys.command("list")
@click.pass_context
def list_keys(ctx: click.Context) -> None:
    """The keys in agent.env: id and person."""
    from agent.home import ENV_FILE_NAME, read_env_file
    from agent.http.api_keys import keys_in

    settings = ctx.obj["load"](ctx)
    found = keys_in(read_env_file(settings.home / ENV_FILE_NAME))
    if not found:
        click.echo("no API keys; `agent http keys add PERSON` makes one")
    for key in found:
        click.echo(f"{key.id}  {key.person}")


@keys.command()
@click.argument("key_id")
@click.pass_context
def revoke(ctx: click.Context, key_id: str) -> None:
    """Remove key KEY_ID from agent.env: a running daemon refuses it within a second."""
    from agent.cli.setup.files import drop_env
    from agent.home import ENV_FILE_NAME
    from agent.http.api_keys import PREFIX

    settings = ctx.obj["load"](ctx)
    if not drop_env(settings.home / ENV_FILE_NAME, {f"{PREFIX}{key_id.upper()}"}):
        click.echo(f"no key {key_id} in agent.env (`agent http keys list`)", err=True)
        sys.exit(2)
    click.echo(f"key {key_id.upper()} revoked")
