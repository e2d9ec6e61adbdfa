"""`agent init`: the home, a commented config.toml and the workspace — and on a terminal,
first the questions of a first setup: the model and its key (checked with one tiny call),
the Telegram and Discord bots (their tokens checked), who may talk to them, the Arduino's
port. Every question has a flag, so a script answers them all without a terminal. With
no terminal (or `--defaults`) and no answer given, it copies the template and the workspace,
keeping whatever is there, and prints the same next commands as the guided setup.

The key and the tokens go to `<home>/agent.env` (0600), which every command reads at
start; config.toml holds no secret (the settings refuse one there)."""

from __future__ import annotations

import os
import sys
from dataclasses import dataclass, field
from pathlib import Path

import click

from agent.cli.command_name import with_command
from agent.cli.setup import questions as q
from agent.cli.setup.checks import (
    HOSTED_CHECK_S,
    LOCAL_CHECK_S,
    Check,
    check_discord,
    check_model,
    check_telegram,
    serial_ports,
    served_models,
)
from agent.cli.setup.files import (
    DISCORD_TOKEN_ENV,
    TELEGRAM_TOKEN_ENV,
    Answers,
    config_snippet,
    render_config,
    secret_problem,
    store_env,
    write_config,
)
from agent.home import ENV_FILE_NAME, default_home, find_config_file, load_env_file

NEXT_STEPS = (
    ("agent doctor", "check the whole setup (--check-model: and time one request)"),
    ("agent chat", "talk to it here, in the terminal"),
    ('agent run -m "What is in your workspace?"', "one message, one reply"),
    ("agent run", "the local daemon and the enabled bots, until Ctrl-C"),
    ("agent service install", "start `agent run` at every login"),
)


@dataclass(frozen=True)
class InitOptions:
    """`agent init`'s flags: each answers one question (None: not given)."""

    defaults: bool = False
    model: str | None = None
    api_base: str | None = None
    key: str | None = None
    key_env: str | None = None
    telegram_token: str | None = None
    discord_token: str | None = None
    owner_ids: tuple[str, ...] = ()
    board_port: str | None = None
    skip_check: bool = False
    replace_config: bool = False

    @property
    def answers_given(self) -> bool:
        given = (
            self.model,
            self.api_base,
            self.key,
            self.key_env,
            self.telegram_token,
            self.discord_token,
            self.board_port,
        )
        return any(v is not None for v in given) or bool(self.owner_ids) or self.replace_config


def run_init(ctx: click.Context, options: InitOptions) -> int:
    """The exit status: 0, or 1 when a check failed (what was answered is written anyway,
    so the fix is one line of agent.env or config.toml)."""
    home = default_home(os.environ)
    config_file = find_config_file(ctx.obj["config"], os.environ)
    interactive = not options.defaults and sys.stdin.isatty() and sys.stdout.isatty()
    if not interactive and not options.answers_given:
        return _as_before(ctx, home, config_file)
    load_env_file(home, os.environ)  # a key kept there from before counts as present
    setup = _Setup(options, home, interactive)
    if interactive:
        click.echo(f"Setting up pinclaw in {home}.")
        click.echo("Enter takes the [default]; Ctrl-C stops, with nothing written yet.")
    setup.settle_model()
    for channel in ("telegram", "discord"):
        setup.settle_channel(channel)
    setup.settle_board()
    setup.write(ctx, config_file)
    if interactive or not setup.failed:
        _print_next_steps()
    return 1 if setup.failed else 0


def _as_before(ctx: click.Context, home: Path, config_file: Path) -> int:
    """`agent init` as it always was: the template copied, nothing asked or checked."""
    from agent.workspace import init_home

    workspace = ctx.obj["load"](ctx).workspace_dir if config_file.exists() else home / "workspace"
    report = init_home(home, workspace, config_file)
    _say(report.tightened)
    for path in report.created:
        click.echo(f"created  {path}")
    for path in report.kept:
        click.echo(f"kept     {path} (already there)")
    _print_next_steps()  # a script's or a Dockerfile's reader needs them as much
    return 0


def _say(line: str | None) -> None:
    if line:
        click.echo(line, err=True)


def _report(label: str, check: Check) -> None:
    click.echo(f"{'ok ' if check.ok else 'FAIL'} {label}: {check.line}")


@dataclass
class _Setup:
    """The answers as they are settled, one question (or flag) at a time."""

    options: InitOptions
    home: Path
    interactive: bool
    answers: Answers = field(default_factory=Answers)
    failed: list[str] = field(default_factory=list)

    def __post_init__(self) -> None:
        self.owners = q.owner_ids(self.options.owner_ids)
        self.flag_key = self._flag_key()

    def _flag_key(self) -> str | None:
        options = self.options
        if options.key is not None and options.key_env is not None:
            raise click.UsageError("give --key or --key-env, not both")
        if (options.key or options.key_env) and not options.model and not self.interactive:
            raise click.UsageError("--key goes with --model: the key's variable is the provider's")
        if options.api_base and not options.model and not self.interactive:
            raise click.UsageError("--api-base goes with --model")
        key = options.key
        if options.key_env is not None:
            key = os.environ.get(options.key_env)
            if not key:
                raise click.UsageError(f"--key-env: ${options.key_env} is not set")
        for value, flag in (
            (key, "--key"),
            (options.telegram_token, "--telegram-token"),
            (options.discord_token, "--discord-token"),
        ):
            problem = secret_problem(value) if value is not None else None
            if problem is not None:
                raise click.BadParameter(problem, param_hint=flag)
        return key

    # -- the model and its key ---------------------------------------------------------------

    def settle_model(self) -> None:
        options = self.options
        if not self.interactive and not options.model:
            return
        while True:
            provider = None
            if options.model:
                model, api_base = options.model, options.api_base or ""
            else:
                provider = q.choose_provider()
                api_base = options.api_base or q.ask_api_base(provider)
                served = served_models(api_base, ollama=provider.ollama) if api_base else []
                model = q.ask_model_name(provider, served)
            var = q.key_variable(model, api_base)
            key = self._settle_key(var, model, api_base, provider)
            check = self._check_model(model, api_base, var, key)
            while check is not None and check.refused and self._again("Type the key again?"):
                key = self._settle_key(var, model, api_base, provider, again=True)
                check = self._check_model(model, api_base, var, key)
            if (
                check is None
                or check.ok
                or check.refused  # the key, not the model: declined to type it again
                or options.model
                or not self._again("Choose the model (or its address) again?")
            ):
                break
        self.answers.model, self.answers.api_base = model, api_base
        if var is not None and key and (self.interactive or key in (self.flag_key, q.DUMMY_KEY)):
            self.answers.secrets[var] = key  # a script's own environment is not copied
        if check is not None and not check.ok:
            self.failed.append("model")

    def _settle_key(
        self,
        var: str | None,
        model: str,
        api_base: str,
        provider: q.Provider | None,
        *,
        again: bool = False,
    ) -> str | None:
        """The key: the flag's, else asked (hidden), else the one already in agent.env or the
        shell, else a local server's dummy; None when the provider needs none or none is
        known."""
        if var is None:
            if self.interactive:
                click.echo(f"{model} needs no key.")
            return None
        if self.flag_key is not None and not again:
            return self.flag_key
        existing = "" if again else os.environ.get(var, "")
        local_server = var == q.LLM_KEY_ENV and bool(api_base)
        if not self.interactive:
            if existing or not local_server:
                return existing or None
            click.echo(f"note model: a local server takes any key; stored the dummy as {var}")
            return q.DUMMY_KEY
        key_url = provider.key_url if provider is not None else ""
        while True:
            typed = q.ask_key(
                var, model, existing=bool(existing), dummy=local_server, key_url=key_url
            )
            problem = secret_problem(typed) if typed else None
            if problem is None:
                break
            click.echo(f"That key cannot be right: {problem}.")
        key = typed or existing or (q.DUMMY_KEY if local_server else "")
        if not key:
            click.echo(f"No key stored: put {var}=... in {self.home / ENV_FILE_NAME} later.")
        return key or None

    def _check_model(
        self, model: str, api_base: str, var: str | None, key: str | None
    ) -> Check | None:
        from agent.config import served_locally

        if self.options.skip_check:
            return None
        if var is not None and not key:
            click.echo("note model: not checked, there is no key to check it with")
            return None
        local = served_locally(model, api_base)
        limit = LOCAL_CHECK_S if local else HOSTED_CHECK_S
        click.echo(f"Checking {model} with one tiny request (up to {limit:.0f} s)...")
        check = check_model(model, api_base, key, local=local)
        _report("model", check)
        return check

    def _again(self, question: str) -> bool:
        return self.interactive and q.confirm(question, default=True)

    # -- the bots -----------------------------------------------------------------------------

    def settle_channel(self, channel: str) -> None:
        """A bot token (flag, or asked hidden), checked with the platform; then its owner."""
        var = TELEGRAM_TOKEN_ENV if channel == "telegram" else DISCORD_TOKEN_ENV
        flag = getattr(self.options, f"{channel}_token")
        if flag is None and not self.interactive:
            return
        token = flag or self._ask_token(channel, var)
        if not token:
            return
        check = self._check_token(channel, token)
        while (
            check is not None
            and check.refused
            and flag is None
            and self._again("Type the token again?")
        ):
            token = self._ask_token(channel, var, again=True)
            if not token:
                return  # Enter: no such bot after all
            check = self._check_token(channel, token)
        if check is not None and not check.ok:
            self.failed.append(channel)
        self.answers.secrets[var] = token
        owner = self.owners.get(channel, "")
        if not owner and self.interactive:
            owner = q.ask_owner(channel)
        if not owner:
            click.echo(f"note {channel}: nobody may talk to the bot until allowed_users has an id")
        setattr(self.answers, channel, True)
        setattr(self.answers, f"{channel}_owner", owner)

    def _ask_token(self, channel: str, var: str, *, again: bool = False) -> str:
        existing = "" if again else os.environ.get(var, "")
        if not again:
            click.echo(q.TOKEN_HINTS[channel])
        enter = "keep the one you have" if existing else f"no {channel.title()}"
        while True:
            typed = q.ask_secret(f"{channel.title()} bot token (hidden; Enter: {enter})")
            problem = secret_problem(typed) if typed else None
            if problem is None:
                return typed or existing
            click.echo(f"That token cannot be right: {problem}.")

    def _check_token(self, channel: str, token: str) -> Check | None:
        if self.options.skip_check:
            return None
        from channels.config import DiscordSettings, TelegramSettings

        settings = TelegramSettings if channel == "telegram" else DiscordSettings
        variable = f"PINCLAW_CHANNELS__{channel.upper()}__API_BASE"
        api_base = os.environ.get(variable) or str(settings.model_fields["api_base"].default)
        check = (check_telegram if channel == "telegram" else check_discord)(token, api_base)
        _report(channel, check)
        return check

    # -- the board ----------------------------------------------------------------------------

    def settle_board(self) -> None:
        port = self.options.board_port
        if port is None and self.interactive:
            port = q.ask_board_port(serial_ports())
        self.answers.board_port = "" if port is None or port.lower() == "none" else port
        if self.answers.board_port:
            click.echo(
                "note board: the tools may touch no pin until [hardware] allowed_pins lists "
                "it (e.g. [13], the LED on the board)"
            )

    # -- on disk ------------------------------------------------------------------------------

    def write(self, ctx: click.Context, config_file: Path) -> None:
        """The workspace, config.toml (an existing one replaced only when asked to, kept as
        .bak) and agent.env."""
        from agent.workspace import CONFIG_TEMPLATE, init_home

        env_file = self.home / ENV_FILE_NAME
        replace = not config_file.exists() or self.options.replace_config
        if not replace and self.interactive:
            replace = q.confirm(
                f"{config_file} already exists. Replace it with these answers (the old one "
                "is kept beside it, as config.toml.bak)?",
                default=False,
            )
        workspace = self.home / "workspace" if replace else ctx.obj["load"](ctx).workspace_dir
        report = init_home(self.home, workspace, None)
        _say(report.tightened)
        if replace:
            template = CONFIG_TEMPLATE.read_text(encoding="utf-8")
            kept = write_config(config_file, render_config(template, self.answers, env_file))
            said = f" (the old one is now {kept})" if kept is not None else ""
            click.echo(f"{'replaced' if kept else 'created '} {config_file}{said}")
        else:
            click.echo(f"kept     {config_file} (already there)")
            snippet = config_snippet(self.answers)
            if snippet:
                click.echo("Your answers are not in it; these lines would set them:")
                for line in snippet:
                    click.echo(f"  {line}")
        if self.answers.secrets:
            names = store_env(env_file, self.answers.secrets)
            click.echo(f"stored   {', '.join(names)} in {env_file} (only you can read it)")
        for path in report.created:
            click.echo(f"created  {path}")
        for path in report.kept:
            click.echo(f"kept     {path} (already there)")


def _print_next_steps() -> None:
    click.echo("Next:")
    steps = [(with_command(command), what) for command, what in NEXT_STEPS]
    width = max(len(command) for command, _ in steps)
    for command, what in steps:
        click.echo(f"  {command.ljust(width)}  {what}")
