"""What `agent init`'s answers become on disk: a commented config.toml (the bundled template
with the answered keys filled in, so every other key still shows its default and its
comment) and NAME=value lines in `<home>/agent.env` (0600), where the key and the bot tokens
go — never config.toml, which refuses secrets."""

from __future__ import annotations

import os
import re
import textwrap
import tomllib
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from agent.home import create_private_file

TELEGRAM_TOKEN_ENV = "PINCLAW_CHANNELS__TELEGRAM__BOT_TOKEN"
DISCORD_TOKEN_ENV = "PINCLAW_CHANNELS__DISCORD__BOT_TOKEN"
OWNER = "owner"  # the [people] entry the answered ids go to
ENV_HEAD = """\
# NAME=value lines pinclaw reads when it starts (`agent run`, `agent run -m`, `agent doctor`,
# the service): API keys, bot tokens, PINCLAW_ settings. A variable your shell exports
# wins over the same name here. Only you can read this file (0600); keep it that way.
"""
SECTION_NOTES = {
    f"people.{OWNER}": "you: your private chats get MEMORY.md and USER.md, like the terminal"
}
# A value written bare; anything else is single-quoted (systemd and `sh` read both alike).
_BARE = re.compile(r"[A-Za-z0-9._~+/=:@%,-]+")
_KEY_LINE = r"^(?P<key>{key})(?P<eq>\s*=\s*)(?P<value>.*?)(?P<comment>\s+#.*)?$"


@dataclass
class Answers:
    """What the questions (or the flags) settled."""

    model: str = ""
    api_base: str = ""
    secrets: dict[str, str] = field(default_factory=dict)  # for agent.env
    telegram: bool = False
    telegram_owner: str = ""  # a numeric id or @username
    discord: bool = False
    discord_owner: str = ""
    board_port: str = ""  # "": no board

    def settings(self) -> dict[str, dict[str, Any]]:
        """The config keys these answers set, by section."""
        found: dict[str, dict[str, Any]] = {}
        if self.model:
            found["llm"] = {"model": self.model}
            if self.api_base:
                found["llm"]["api_base"] = self.api_base
        for name, on, owner in (
            ("telegram", self.telegram, self.telegram_owner),
            ("discord", self.discord, self.discord_owner),
        ):
            if on:
                found[f"channels.{name}"] = {"enabled": True, "allowed_users": _listed(owner)}
        if self.board_port:
            found["hardware"] = {"enabled": True, "port": self.board_port}
        person = {
            name: owner
            for name, owner in (("telegram", self.telegram_owner), ("discord", self.discord_owner))
            if owner.isdigit()
        }
        if person:
            found[f"people.{OWNER}"] = {**person, "owner": True}
        return found


def _listed(owner: str) -> list[str]:
    return [owner] if owner else []


def secret_problem(value: str) -> str | None:
    """Why `value` cannot be a key or token in agent.env, or None: keys have no spaces,
    quotes or control characters, so one that does was pasted wrong."""
    if not value:
        return "it is empty"
    if any(c.isspace() or c in "'\"\\" or not c.isprintable() for c in value):
        return "it holds spaces, quotes or control characters: paste the key alone"
    return None


def store_env(path: Path, values: dict[str, str]) -> list[str]:
    """Set NAME=value lines in agent.env: a name's earlier line is replaced, every other line
    kept. The file is made 0600 from its first moment (a new one, then renamed over the old),
    so a key is never readable by others, not even for an instant. The names written."""
    for value in values.values():
        problem = secret_problem(value)
        if problem is not None:
            raise ValueError(problem)
    try:
        lines = path.read_text(encoding="utf-8").splitlines()
    except FileNotFoundError:
        lines = ENV_HEAD.splitlines()
    left = dict(values)
    kept: list[str] = []
    for line in lines:
        name = line.strip().removeprefix("export ").partition("=")[0].strip()
        if "=" in line and not line.lstrip().startswith("#") and name in values:
            if name in left:
                kept.append(_env_line(name, left.pop(name)))
            continue  # a second line of the same name: the new value stands alone
        kept.append(line)
    kept += [_env_line(name, value) for name, value in left.items()]
    temporary = path.with_name(f".{path.name}.{os.getpid()}.new")
    temporary.unlink(missing_ok=True)
    if not create_private_file(temporary, "\n".join(kept) + "\n"):
        raise FileExistsError(temporary)  # made by someone else since: not ours to move
    os.replace(temporary, path)
    return list(values)


def drop_env(path: Path, names: set[str]) -> bool:
    """Remove the NAME=value lines of `names` from agent.env (made 0600 as `store_env`
    makes it); False when none was there."""
    try:
        lines = path.read_text(encoding="utf-8").splitlines()
    except FileNotFoundError:
        return False
    kept = [
        line
        for line in lines
        if line.lstrip().startswith("#")
        or line.strip().removeprefix("export ").partition("=")[0].strip() not in names
    ]
    if len(kept) == len(lines):
        return False
    temporary = path.with_name(f".{path.name}.{os.getpid()}.new")
    temporary.unlink(missing_ok=True)
    if not create_private_file(temporary, "\n".join(kept) + "\n"):
        raise FileExistsError(temporary)
    os.replace(temporary, path)
    return True


def _env_line(name: str, value: str) -> str:
    return f"{name}={value}" if _BARE.fullmatch(value) else f"{name}='{value}'"


def render_config(template: str, answers: Answers, env_file: Path) -> str:
    """The template with the answered keys set in place (their comments kept) and a header
    line saying what `agent init` filled in and where the secrets are."""
    text = template
    for section, keys in answers.settings().items():
        for key, value in keys.items():
            text = _set_key(text, section, key, _toml(value))
    said = ", ".join(f"[{section}]" for section in answers.settings()) or "nothing"
    lines = textwrap.wrap(f"`agent init` filled in {said}; every other key has its default.", 88)
    lines.append(f"Your keys and bot tokens are in {env_file} (0600), never in this file.")
    head, blank, rest = text.partition("\n\n")
    text = head + "\n" + "".join(f"# {line}\n" for line in lines) + blank + rest
    _check(text, answers)
    return text


def config_snippet(answers: Answers) -> list[str]:
    """The answered keys as TOML lines, for a config.toml that was kept."""
    lines: list[str] = []
    for section, keys in answers.settings().items():
        lines.append(f"[{section}]")
        lines += [f"{key} = {_toml(value)}" for key, value in keys.items()]
    return lines


def _toml(value: Any) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, list):
        return "[" + ", ".join(_toml(item) for item in value) + "]"
    text = str(value).replace("\\", "\\\\").replace('"', '\\"')
    return f'"{text}"'


def _set_key(text: str, section: str, key: str, value: str) -> str:
    """`key = value` in `[section]`: the template's line rewritten with its comment kept in
    its column, or a new line (a new section at the end) where the template has none."""
    lines = text.split("\n")
    header = f"[{section}]"
    try:
        start = next(i for i, line in enumerate(lines) if line.split("#")[0].strip() == header)
    except StopIteration:
        note = SECTION_NOTES.get(section, "")
        header += f"{' ' * (27 - len(header))} # {note}" if note else ""
        return text.rstrip("\n") + f"\n\n{header}\n{key} = {value}\n"
    end = next(
        (i for i in range(start + 1, len(lines)) if lines[i].lstrip().startswith("[")),
        len(lines),
    )
    while end > start + 1 and not lines[end - 1].strip():
        end -= 1  # a new line goes after the section's last key, not after blank lines
    pattern = re.compile(_KEY_LINE.format(key=re.escape(key)))
    for index in range(start + 1, end):
        found = pattern.match(lines[index])
        if found is None:
            continue
        assignment = f"{key}{found['eq']}{value}"
        comment = (found["comment"] or "").lstrip()
        if comment:  # kept in its column while the new value fits before it
            column = len(lines[index]) - len(comment)
            assignment = f"{assignment.ljust(column - 1)} {comment}"
        lines[index] = assignment
        return "\n".join(lines)
    lines.insert(end, f"{key} = {value}")
    return "\n".join(lines)


def _check(text: str, answers: Answers) -> None:
    """The written text reads back as the answers (a template line that changed shape would
    otherwise lose an answer without a word)."""
    data = tomllib.loads(text)
    for section, keys in answers.settings().items():
        node: Any = data
        for part in section.split("."):
            node = node[part]
        for key, value in keys.items():
            if node.get(key) != value:
                raise ValueError(f"config template: {section}.{key} could not be set")


def write_config(path: Path, text: str) -> Path | None:
    """Write a new config.toml (0600); an existing one is first renamed to the first free
    `config.toml.bak[.N]`, returned so the caller can say where it went."""
    path.parent.mkdir(parents=True, exist_ok=True)
    kept = None
    if path.exists() or path.is_symlink():
        kept = path.with_name(path.name + ".bak")
        number = 1
        while kept.exists() or kept.is_symlink():
            number += 1
            kept = path.with_name(f"{path.name}.bak.{number}")
        os.rename(path, kept)
    if not create_private_file(path, text):
        raise FileExistsError(path)
    return kept
