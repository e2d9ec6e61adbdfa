"""`agent send --channel telegram --to CHAT "text"`: a message of the owner's own (a script,
a cron job) handed to the running daemon, which sends it as the bot through the chat's
outbox. Thin like the one-shot client: click, the standard library and the channels registry.
"""

from __future__ import annotations

import os
import sys

import click

from channels.registry import channel_names

EXIT_NO_DAEMON = 2
EXIT_REFUSED = 2
# What --to takes. Never `@name`: Telegram reads it as a public channel, not a person.


@click.command()
@click.option("--channel", required=True, type=click.Choice(channel_names()), help="Where to send.")
@click.option(
    "--to",
    "chat",
    required=True,
    help="A numeric chat id (Telegram chat, Discord channel) or a person's name from [people].",
)
@click.option(
    "--wait",
    "wait_s",
    type=click.FloatRange(0, 600),
    default=30.0,
    show_default=True,
    help="Seconds to wait for the delivery before returning (it goes on in the daemon).",
)
@click.argument("text", required=False)
def send(channel: str, chat: str, wait_s: float, text: str | None) -> None:
    """Send TEXT (or standard input) to a chat as the bot, through the running daemon."""
    from agent.cli.local_client import call
    from agent.daemon.chat_address import TO_ACCEPTED, chat_form
    from agent.home import default_home

    if chat_form(channel, chat) is None:
        click.echo(f"error: {chat!r} is not a chat: {TO_ACCEPTED}", err=True)
        sys.exit(EXIT_REFUSED)
    if text is None or text == "-":
        text = sys.stdin.read()
    request = {"op": "send", "channel": channel, "to": chat, "text": text, "wait_s": wait_s}
    code = call(default_home(os.environ), request)
    if code is None:
        click.echo(
            "error: agent send needs the running daemon (`agent run`, or `agent service "
            "install`): it is the daemon that holds the chat channels",
            err=True,
        )
        code = EXIT_NO_DAEMON
    sys.exit(code)
