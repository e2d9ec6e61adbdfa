"""The `agent` command (also installed as `pinclaw`). Thin: it parses and calls app code.

Nothing heavy is imported at module level — not pydantic-settings, not LiteLLM, not even
asyncio or logging: `agent --help` stays fast, and so does a one-shot handed to the local
daemon (`agent/cli/local_client.py`).
"""

from __future__ import annotations

import os
import sys
from pathlib import Path
from typing import TYPE_CHECKING, Any, ClassVar, NoReturn

import click

from agent import __version__, collector
from channels.registry import channel_names

if TYPE_CHECKING:
    from agent.config import Settings
    from agent.security import ScrubbingFilter


def _load(ctx: click.Context) -> Settings:
    """The settings, or exit 2 with one line per problem."""
    from agent.config import ConfigError, load_settings
    from agent.security import ScrubbingFilter

    try:
        settings = load_settings(ctx.obj["config"])
    except ConfigError as exc:
        for line in exc.problems:
            click.echo(f"config error: {line}", err=True)
        sys.exit(2)
    from agent.config import make_scrubber
    from agent.home import secure_home

    _setup_logging(
        ctx.obj["verbose"], ScrubbingFilter(make_scrubber(settings)), ctx.obj.get("quiet", False)
    )
    ctx.obj["state_db"] = settings.state_db  # an SQLite error is then checked against it
    # Every command that reads the settings opens the home: it is made the owner's alone
    # first, and an older home's fix is said once, on stderr (a service's log).
    _say(secure_home(settings.home, settings.workspace_dir))
    return settings


def _say(line: str | None) -> None:
    if line:
        click.echo(line, err=True)


def _setup_logging(verbose: int, scrub_filter: ScrubbingFilter, quiet: bool = False) -> None:
    from agent.cli.logs import setup_logging

    setup_logging(verbose, quiet, scrub_filter)


def _fail(message: str, code: int = 1) -> NoReturn:
    click.echo(message, err=True)
    sys.exit(code)


def _check_session(session: str | None) -> None:
    """Exit 2 in one line when --session is not UTF-8 text (a Latin-1 terminal's bytes
    reach Python as lone surrogates, which state.db cannot store): refused, not repaired,
    as two names repaired could become one session."""
    from agent.cli.local_client import is_utf8  # light: the one-shot's own path

    if session is not None and not is_utf8(session):
        _fail("error: --session: the name is not UTF-8 text (the terminal's encoding?)", 2)


class _Commands(click.Group):
    """The command groups of their own files are imported only when named, so a one-shot
    loads only what `run` needs and `--help` lists them from SUMMARIES (a test keeps each
    summary equal to its group's own short help)."""

    ELSEWHERE: ClassVar[dict[str, str]] = {
        "hardware": "agent.cli.stores.hardware",
        "jobs": "agent.cli.stores.jobs",
        "budget": "agent.cli.owner.budget",
        "http": "agent.cli.owner.http_keys",
        "mcp": "agent.cli.mcp",
        "reference": "agent.cli.reference.command",
        "memory": "agent.cli.stores.memory",
        "pairing": "agent.cli.owner.pairing",
        "reload": "agent.cli.owner.reload",
        "schedules": "agent.cli.stores.schedules",
        "send": "agent.cli.owner.send",
        "service": "agent.cli.service",
        "skills": "agent.cli.skills",
        "state": "agent.cli.stores.state",
        "usage": "agent.cli.owner.usage",
    }
    SUMMARIES: ClassVar[dict[str, str]] = {
        "hardware": (
            "Show what the boards' outputs did: the actuation log (also while `agent run` is "
            "running)."
        ),
        "jobs": "List, show and cancel the sub-agents' jobs (also while `agent run` is running).",
        "budget": "Show and set the spending limits (also while `agent run` is running).",
        "http": "Manage the keys of the HTTP API (OpenAI-compatible), kept in agent.env.",
        "mcp": "List the MCP servers and their tools, and call a tool to try it.",
        "reference": (
            "Write the configuration and command reference (docs/reference/) and "
            "config.example.toml from the code."
        ),
        "memory": "List, search, delete, export and import the agent's long-term memories.",
        "pairing": (
            "Let people in who wrote to the bot: list, approve or deny their codes, make an "
            "invite (also while `agent run` is running)."
        ),
        "reload": "Apply edits of config.toml and agent.env to the running daemon now.",
        "schedules": (
            "List and cancel what the agent is to do later, and its pin watches (also while "
            "`agent run` is running)."
        ),
        "send": "Send TEXT (or standard input) to a chat as the bot, through the running daemon.",
        "service": "Run `agent run` as a login service (systemd user unit, launchd agent).",
        "skills": "List, inspect and create skills (folders with a SKILL.md).",
        "state": (
            "Back up state.db and check it (also while `agent run` is running); move it to "
            "PostgreSQL."
        ),
        "usage": "Show what the model calls used and cost: a table with totals and a bar per day.",
    }

    def list_commands(self, ctx: click.Context) -> list[str]:
        return sorted([*super().list_commands(ctx), *self.ELSEWHERE])

    def get_command(self, ctx: click.Context, cmd_name: str) -> click.Command | None:
        if cmd_name in self.ELSEWHERE:
            import importlib

            command = getattr(importlib.import_module(self.ELSEWHERE[cmd_name]), cmd_name)
            return command if isinstance(command, click.Command) else None
        return super().get_command(ctx, cmd_name)

    def invoke(self, ctx: click.Context) -> Any:
        """What a person can fix (a home or state.db that cannot be used, a model's key, a
        missing package: agent/cli/user_errors.py) stops any command with one line and exit
        2; -v adds the traceback."""
        try:
            return super().invoke(ctx)
        except Exception as exc:
            from agent.cli.user_errors import user_line, with_traceback
            from agent.home import default_home

            obj = ctx.obj or {}
            line = user_line(exc, home=default_home(os.environ), state_db=obj.get("state_db"))
            if line is None:
                raise
            if obj.get("verbose"):
                with_traceback(exc)
            _fail(line, 2)

    def format_commands(self, ctx: click.Context, formatter: click.HelpFormatter) -> None:
        names = self.list_commands(ctx)
        limit = formatter.width - 6 - max(map(len, names))
        rows = []
        for name in names:
            if name in self.SUMMARIES:  # a stand-in, so the summary is cut as click cuts
                command: click.Command | None = click.Command(name, help=self.SUMMARIES[name])
            else:
                command = super().get_command(ctx, name)
            if command is not None:
                rows.append((name, command.get_short_help_str(limit)))
        with formatter.section("Commands"):
            formatter.write_dl(rows)


@click.group(cls=_Commands, context_settings={"help_option_names": ["-h", "--help"]})
@click.option(
    "--config",
    "config",
    type=click.Path(path_type=Path),
    default=None,
    help="Config file (default: $PINCLAW_CONFIG, else ~/.pinclaw/config.toml).",
)
@click.option("-v", "--verbose", count=True, help="More log output on stderr (-vv: debug).")
@click.option(
    "-q", "--quiet", is_flag=True, help="On stderr only errors (not what `agent run` starts)."
)
@click.version_option(__version__, prog_name="pinclaw")
@click.pass_context
def cli(ctx: click.Context, config: Path | None, verbose: int, quiet: bool) -> None:
    """pinclaw: a chat agent with shell, file, memory and Arduino tools.

    Talk to it on Telegram, Discord or here in the terminal.
    """
    if quiet and verbose:
        raise click.UsageError("-q and -v go one at a time")
    # `ctx.obj` may come from main(), which reads "leave_at_once" after the command.
    ctx.ensure_object(dict).update(config=config, verbose=verbose, quiet=quiet, load=_load)


@cli.command()
@click.option(
    "-m", "--message", help="Send one message, print the reply and exit (-: read it from stdin)."
)
@click.option("--session", help="Continue the stored one-shot conversation NAME.")
@click.option(
    "--no-daemon", is_flag=True, help="With -m: answer in this process even if a daemon runs."
)
@click.pass_context
def run(ctx: click.Context, message: str | None, session: str | None, no_daemon: bool) -> None:
    """Answer one message (-m), or serve the local daemon and every enabled channel until
    stopped, saying on stderr what it starts (`agent -q run`: only errors). A one-shot goes to
    the running daemon when there is one."""
    if no_daemon and message is None:
        raise click.UsageError("--no-daemon goes with -m")
    if message == "-":
        message = sys.stdin.read()
    if message is not None and not message.strip():
        _fail("error: the message is empty", 2)
    _check_session(session)
    if message is not None and not no_daemon and not ctx.obj.get("daemon_tried"):
        from agent.cli.local_client import through_daemon

        code = through_daemon(message, session, ctx.obj["config"], verbose=ctx.obj["verbose"] > 0)
        if code is not None:
            sys.exit(code)
    if message is not None:
        sys.exit(_cold_one_shot(ctx, message, session))
    import asyncio

    settings = _load_with_model(ctx)
    from agent.daemon.serve import serve

    sys.exit(asyncio.run(serve(settings)))


def _load_with_model(ctx: click.Context) -> Settings:
    settings = _load(ctx)
    if not settings.llm.model:
        _fail(
            "config error: llm.model: not set; set PINCLAW_LLM__MODEL "
            "(e.g. openai/gpt-4o-mini) or [llm] model in the config file",
            2,
        )
    return settings


def _cold_one_shot(ctx: click.Context, message: str, session: str | None) -> int:
    """The one-shot in this process; on a terminal a spinner on stderr once the settings are
    read (what they say goes to stderr first) while the model's client loads, and until the
    reply. Its exit status."""
    import asyncio

    from agent.cli.logs import quiet_for_one_shot
    from agent.cli.one_shot_screen import open_screen

    settings = _load_with_model(ctx)
    quiet_for_one_shot(ctx.obj["verbose"])
    with open_screen() as screen:
        from agent.cli.one_shot import run_once

        code = asyncio.run(run_once(settings, message, session=session, screen=screen))
    ctx.obj["leave_at_once"] = True  # everything is written: main() skips the teardown
    ctx.obj["warm_start_s"] = settings.agent.warm_start_s  # main() leaves one for the next
    return code


@cli.command()
@click.option("--session", help="Resume the stored conversation NAME (default: a new one).")
@click.option("--no-daemon", is_flag=True, help="Answer in this process even if a daemon runs.")
@click.pass_context
def chat(ctx: click.Context, session: str | None, no_daemon: bool) -> None:
    """Talk with the agent in this terminal, turn after turn.

    The running daemon answers when there is one, else this process does."""
    from agent.cli.chat.loop import run_chat

    _check_session(session)
    sys.exit(run_chat(ctx, session, no_daemon=no_daemon))


@cli.command()
@click.option("--defaults", is_flag=True, help="Ask nothing (as without a terminal).")
@click.option("--model", help="LiteLLM model name, e.g. openai/gpt-4o-mini, ollama_chat/llama3.1.")
@click.option("--api-base", help="The model's server, e.g. http://localhost:8080/v1.")
@click.option("--key", help="The model's API key (others see it in `ps`: prefer --key-env).")
@click.option("--key-env", metavar="NAME", help="Read the model's API key from $NAME.")
@click.option("--telegram-token", metavar="TOKEN", help="Telegram bot token (from @BotFather).")
@click.option("--discord-token", metavar="TOKEN", help="Discord bot token.")
@click.option(
    "--owner-id",
    "owner_ids",
    multiple=True,
    metavar="[CHANNEL:]ID",
    help="Your user id, the one the bots answer (telegram:ID, discord:ID; repeatable).",
)
@click.option("--board-port", metavar="PORT", help='Arduino serial port, "auto" or "none".')
@click.option("--skip-check", is_flag=True, help="Check neither the model nor the tokens.")
@click.option("--replace-config", is_flag=True, help="Replace an existing config.toml (.bak).")
@click.pass_context
def init(ctx: click.Context, /, **answers: Any) -> None:
    """Create the home folder, a commented config.toml and the workspace (keeps existing files).

    On a terminal it first asks for the model and its key (checked with one tiny request),
    the Telegram and Discord bot tokens (checked), your user id and the Arduino's port. The
    key and tokens go to <home>/agent.env (0600), never to config.toml. Each question has a
    flag; without a terminal, or with --defaults, only the flags given are used."""
    from agent.cli.setup.wizard import InitOptions, run_init

    sys.exit(run_init(ctx, InitOptions(**answers)))


@cli.command()
@click.option("--check-model", is_flag=True, help="Also send one tiny request to the model.")
@click.pass_context
def doctor(ctx: click.Context, check_model: bool) -> None:
    """Check the configuration, workspace, model, key and board."""
    import asyncio

    from agent.cli.doctor.checks import run_doctor

    settings = _load(ctx)
    sys.exit(asyncio.run(run_doctor(settings, check_model=check_model)))


@cli.group()
def prompt() -> None:
    """Inspect the system prompt."""


@prompt.command("show")
@click.option(
    "--channel", type=click.Choice([*channel_names(), "cli"]), default="cli", show_default=True
)
@click.option(
    "--mode",
    type=click.Choice(["full", "compact", "minimal", "none"]),
    default=None,
    help="Prompt mode (default: as agent.prompt_mode chooses for the model).",
)
@click.option("--model", default=None, help="As this model would get it (default: llm.model).")
@click.option(
    "--stats",
    is_flag=True,
    help="Print a table of sections and tokens instead; on stderr the mode chosen and why, "
    "and the first request's tokens (system prompt + tool schemas).",
)
@click.pass_context
def prompt_show(
    ctx: click.Context, channel: str, mode: str | None, model: str | None, stats: bool
) -> None:
    """Print exactly the system prompt a channel's model receives."""
    from agent.cli.prompt_show import inspect_prompt, prompt_stats

    settings = _load(ctx)
    if stats:
        table, summary = prompt_stats(settings, channel, mode, model)
        click.echo(table)
        click.echo(summary, err=True)
    else:
        sys.stdout.write(inspect_prompt(settings, channel, mode, model).text)
        sys.stdout.flush()


def main(argv: Any = None, *, daemon_tried: bool = False) -> None:
    """The commands, through click (`daemon_tried`: agent/__main__.py already offered this
    one-shot to the daemon, which did not take it)."""
    collector.hold()  # until a command that runs on has started (agent/collector.py)
    state: dict[str, Any] = {"daemon_tried": daemon_tried}
    try:
        cli.main(args=argv, prog_name="agent", obj=state)
    except SystemExit as done:
        if state.get("leave_at_once"):
            from agent.cli.one_shot import leave
            from agent.warm.spawn import start_warm

            start_warm(state.get("warm_start_s", 0.0))

            leave(done.code if isinstance(done.code, int) else 1)
        raise


if __name__ == "__main__":
    main()
