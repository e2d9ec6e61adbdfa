"""`agent service install [--print]`: `agent run` as a login service, so the local daemon
is always there — a systemd user unit on Linux, a launchd agent on macOS.

The file is written, never the service manager run: the command prints the next steps. A
service does not see the shell's environment, so both read `<home>/agent.env` (NAME=value
lines: API keys, PINCLAW_ settings; every command reads it too, under what the shell
exports), created empty (0600) when missing.
"""

from __future__ import annotations

import os
import sys
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path

import click

from agent.home import ENV_FILE_NAME, LOG_NAME, create_private_file, default_home, secure_home

UNIT_NAME = "pinclaw.service"
LAUNCHD_LABEL = "dev.pinclaw.agent"
ENV_FILE_HEAD = """\
# NAME=value lines every `agent` command reads (variables your shell exports win), and the
# only ones `agent run` as a service sees: API keys and PINCLAW_ settings, e.g.
#   OPENAI_API_KEY=sk-...
#   PINCLAW_CHANNELS__TELEGRAM__BOT_TOKEN=123456:ABC...
# Keep non-secret PINCLAW_ settings the same as in your shell (or in config.toml): a
# one-shot reaches the daemon only when both read the same settings.
"""


@dataclass(frozen=True)
class ServiceFile:
    path: Path
    text: str
    next_steps: tuple[str, ...]


def command_line(python: str, config: Path | None) -> list[str]:
    """`agent run` as the service starts it: this Python, so this installation. `-P`: systemd
    starts a user's unit in their home folder, and `-m` would put that folder first on the
    import path, where an agent.py, a discord.py or a planted package would run instead."""
    options = ["--config", str(config.expanduser().resolve())] if config else []
    return [python, "-P", "-m", "agent", *options, "run"]


def service_file(
    platform: str, *, argv: list[str], home: Path, user_home: Path, environ: Mapping[str, str]
) -> ServiceFile:
    """The unit (Linux) or property list (macOS) running `argv`, for `platform` as
    `sys.platform` names it."""
    if platform == "darwin":
        return _launchd(argv, home, user_home)
    if platform.startswith("linux"):
        return _systemd(argv, home, user_home, environ)
    raise click.ClickException(f"no service file for {platform}: run `agent run` yourself")


def _systemd_word(word: str) -> str:
    """One word of ExecStart=: `%` doubled; quoted when it holds spaces or quotes."""
    word = word.replace("%", "%%")
    if any(c.isspace() or c in "\"'\\" for c in word):
        return '"' + word.replace("\\", "\\\\").replace('"', '\\"') + '"'
    return word


def _systemd(
    argv: list[str], home: Path, user_home: Path, environ: Mapping[str, str]
) -> ServiceFile:
    config_home = Path(environ.get("XDG_CONFIG_HOME") or user_home / ".config")
    text = f"""\
[Unit]
Description=pinclaw: the local daemon and the enabled chat channels (agent run)
After=network-online.target
Wants=network-online.target

[Service]
Type=simple
ExecStart={" ".join(_systemd_word(word) for word in argv)}
Environment={_systemd_word(f"PINCLAW_HOME={home}")}
EnvironmentFile=-{_systemd_word(str(home / ENV_FILE_NAME))}
Restart=on-failure
RestartSec=5
# Each shell command gets a cgroup of its own under the daemon's, so that nothing it
# starts outlives it (tools/sandbox/reaper.py): systemd is told the subtree is ours.
Delegate=yes

[Install]
WantedBy=default.target
"""
    steps = (
        "systemctl --user daemon-reload && systemctl --user enable --now pinclaw",
        "systemctl --user status pinclaw; journalctl --user -u pinclaw -f",
    )
    return ServiceFile(config_home / "systemd" / "user" / UNIT_NAME, text, steps)


def _launchd(argv: list[str], home: Path, user_home: Path) -> ServiceFile:
    import plistlib  # here: `agent --help` does not pay for it

    # launchd has no environment files: a shell reads agent.env, then becomes `agent run`.
    env_file = f'"$PINCLAW_HOME/{ENV_FILE_NAME}"'
    load_env = f"set -a; if [ -f {env_file} ]; then . {env_file}; fi"
    plist = {
        "Label": LAUNCHD_LABEL,
        "ProgramArguments": ["/bin/sh", "-c", f'{load_env}; set +a; exec "$@"', "pinclaw", *argv],
        "EnvironmentVariables": {"PINCLAW_HOME": str(home)},
        "RunAtLoad": True,
        "KeepAlive": {"SuccessfulExit": False},  # restarted when it fails, not when stopped
        "StandardOutPath": str(home / LOG_NAME),
        "StandardErrorPath": str(home / LOG_NAME),  # the daemon logs on stderr
    }
    path = user_home / "Library" / "LaunchAgents" / f"{LAUNCHD_LABEL}.plist"
    log = home / LOG_NAME
    steps = (
        f'launchctl bootstrap gui/$(id -u) "{path}"',
        f"launchctl print gui/$(id -u)/{LAUNCHD_LABEL}; tail -f {log}",
    )
    return ServiceFile(path, plistlib.dumps(plist).decode(), steps)


@click.group()
def service() -> None:
    """Run `agent run` as a login service (systemd user unit, launchd agent)."""


@service.command()
@click.option("--print", "print_only", is_flag=True, help="Print the file; write nothing.")
@click.pass_context
def install(ctx: click.Context, print_only: bool) -> None:
    """Write the service file for `agent run`, then print the commands that start it."""
    config: Path | None = ctx.obj["config"]
    home = default_home(os.environ).resolve()
    found = service_file(
        sys.platform,
        argv=command_line(sys.executable, config),
        home=home,
        user_home=Path.home(),
        environ=os.environ,
    )
    if print_only:
        click.echo(found.text, nl=False)
        return
    found.path.parent.mkdir(parents=True, exist_ok=True)
    found.path.write_text(found.text, encoding="utf-8")
    click.echo(f"wrote    {found.path}")
    tightened = secure_home(home)
    if tightened:
        click.echo(tightened, err=True)
    env_file = home / ENV_FILE_NAME
    if create_private_file(env_file, ENV_FILE_HEAD):  # 0600: the keys go there
        click.echo(f"created  {env_file} (put your API key there)")
    if sys.platform == "darwin":  # launchd appends to it keeping its mode: the owner's alone
        create_private_file(home / LOG_NAME)
    click.echo("then:")
    for step in found.next_steps:
        click.echo(f"  {step}")
