"""The questions `agent init` asks on a terminal, the list of common models it offers, and
how an answer is read (which variable a key goes to, whose ids `--owner-id` names).

Plain lines (`click.prompt`, which is `input()`) and `getpass` for secrets, not
prompt_toolkit: they work on any terminal — an SSH session to a Raspberry Pi, a serial
console, a screen reader, `script` — need no cursor-position replies from the terminal,
show exactly what was asked (so a test on a pseudo-terminal reads it as a person would),
and import nothing more. A choice is a number; Enter takes the [default]."""

from __future__ import annotations

import getpass
import re
from dataclasses import dataclass

import click

LLM_KEY_ENV = "PINCLAW_LLM__API_KEY"
# What a local OpenAI-compatible server gets as its key when it was started without one:
# LiteLLM sends some key to every OpenAI-style endpoint.
DUMMY_KEY = "sk-no-key-required"
_TELEGRAM_USERNAME = re.compile(r"@[A-Za-z0-9_]{4,32}")


@dataclass(frozen=True)
class Provider:
    label: str
    model: str  # the offered default, a LiteLLM model name
    key_url: str = ""  # where a key is made
    api_base: str = ""  # the address asked for (a local server), with this default
    ollama: bool = False


PROVIDERS = (
    Provider("OpenAI", "openai/gpt-4o-mini", "https://platform.openai.com/api-keys"),
    Provider(
        "Anthropic", "anthropic/claude-sonnet-4-5", "https://console.anthropic.com/settings/keys"
    ),
    Provider("Google Gemini", "gemini/gemini-2.5-flash", "https://aistudio.google.com/apikey"),
    Provider(
        "OpenRouter (many providers, one key)",
        "openrouter/openai/gpt-4o-mini",
        "https://openrouter.ai/keys",
    ),
    Provider(
        "Ollama, on this machine or your network (no key)",
        "ollama_chat/llama3.1",
        api_base="http://localhost:11434",
        ollama=True,
    ),
    Provider(
        "A local OpenAI-compatible server (llama.cpp's llama-server, LM Studio, vLLM)",
        "openai/local-model",
        api_base="http://localhost:8080/v1",
    ),
    Provider("Another model LiteLLM knows (provider/model)", ""),
)
LOCAL_SERVER_HINT = "llama-server listens on :8080, LM Studio on :1234, vLLM on :8000"


def ask(text: str, default: str = "") -> str:
    """One visible answer; Enter gives `default`."""
    return str(click.prompt(text, default=default, show_default=bool(default))).strip()


def ask_secret(text: str) -> str:
    """One hidden answer (a key, a token): not echoed, never printed back."""
    return getpass.getpass(f"{text}: ").strip()


def confirm(text: str, default: bool) -> bool:
    return bool(click.confirm(text, default=default))


def choose_provider() -> Provider:
    click.echo("Which model should answer?")
    for number, provider in enumerate(PROVIDERS, start=1):
        click.echo(f"  {number}) {provider.label}")
        if provider.model:
            click.echo(f"       e.g. {provider.model}")
    choice = click.prompt("Choice", type=click.IntRange(1, len(PROVIDERS)), default=1)
    return PROVIDERS[int(choice) - 1]


def with_prefix(name: str, prefix: str) -> str:
    """A bare model name gets its provider's LiteLLM prefix ("gpt-4o" -> "openai/gpt-4o")."""
    return name if not prefix or name.startswith(f"{prefix}/") else f"{prefix}/{name}"


def ask_model_name(provider: Provider, served: list[str]) -> str:
    """The model's LiteLLM name: the provider's default or one its server lists."""
    prefix = provider.model.split("/", 1)[0] if provider.model else ""
    if served:
        click.echo(f"The server offers: {', '.join(served[:8])}")
    if not provider.model:
        name = ""
        while "/" not in name:
            name = ask("LiteLLM model name, provider/model (e.g. groq/llama-3.1-8b-instant)")
        return name
    if provider.ollama:
        default = served[0] if served else provider.model.split("/", 1)[1]
        return with_prefix(ask("Model (`ollama pull NAME` fetches one)", default), prefix)
    if provider.api_base:
        default = served[0] if served else provider.model.split("/", 1)[1]
        return with_prefix(ask("Model, as the server names it", default), prefix)
    return with_prefix(ask("Model", provider.model), prefix)


def ask_api_base(provider: Provider) -> str:
    if provider.ollama:
        return ask("Ollama's address", provider.api_base)
    if provider.api_base:
        click.echo(f"Its OpenAI-compatible address ends in /v1 ({LOCAL_SERVER_HINT}).")
        return ask("Server address", provider.api_base)
    return ask("Its api_base (Enter: the provider's own)")


def ask_key(var: str, model: str, *, existing: bool, dummy: bool, key_url: str) -> str:
    """The key for `var`, hidden: what was typed, "" for Enter (the caller decides what
    Enter means: the key already there, the dummy, or none)."""
    if dummy:
        click.echo(
            "A local server checks a key only when it was started with one (--api-key): "
            f"Enter stores the dummy {DUMMY_KEY!r} as {var}."
        )
    elif key_url and not existing:
        click.echo(f"Make a key at {key_url}")
    enter = "keep the one you have" if existing else "the dummy" if dummy else "none for now"
    return ask_secret(f"Key for {model}, stored as {var} (hidden; Enter: {enter})")


def telegram_owner_problem(value: str) -> str | None:
    if value.isdigit() or _TELEGRAM_USERNAME.fullmatch(value):
        return None
    return "a Telegram user id is a number (or give @username)"


def discord_owner_problem(value: str) -> str | None:
    return None if value.isdigit() else "a Discord user id is a number"


OWNER_HINTS = {
    "telegram": (
        "Your Telegram user id or @username: the bot answers only the people listed "
        "(@userinfobot tells you your id)"
    ),
    "discord": (
        "Your Discord user id: the bot answers only the people listed (Settings > Advanced > "
        "Developer Mode, then right-click your name > Copy User ID)"
    ),
}
TOKEN_HINTS = {
    "telegram": "Telegram: a bot token from @BotFather (send it /newbot).",
    "discord": (
        "Discord: a bot token from https://discord.com/developers/applications (your app > "
        "Bot > Reset Token; turn on Message Content Intent there too)."
    ),
}


def ask_owner(channel: str) -> str:
    check = telegram_owner_problem if channel == "telegram" else discord_owner_problem
    click.echo(OWNER_HINTS[channel])
    while True:
        answer = ask("Your id (Enter: nobody yet)")
        problem = check(answer) if answer else None
        if problem is None:
            return answer
        click.echo(problem)


def ask_board_port(ports: list[tuple[str, str]]) -> str:
    """A listed port's number, a path, "auto", or Enter for no board."""
    if ports:
        click.echo("Serial ports found:")
        for number, (device, description) in enumerate(ports, start=1):
            shown = description if description and description != "n/a" else ""
            click.echo(f"  {number}) {device}" + (f"  {shown}" if shown else ""))
    else:
        click.echo("No serial port found (plug the Arduino in first to see it listed).")
    while True:
        answer = ask('Arduino port: a number above, a path or "auto" (Enter: no board)')
        if not answer.isdigit():
            return answer
        if 1 <= int(answer) <= len(ports):
            return ports[int(answer) - 1][0]
        click.echo("no such number")


OWNER_PROBLEMS = {"telegram": telegram_owner_problem, "discord": discord_owner_problem}


def key_variable(model: str, api_base: str) -> str | None:
    """Where the model's key goes: None for a provider that needs none (Ollama); pinclaw's
    own PINCLAW_LLM__API_KEY for a server at an api_base (a local one's dummy key then never
    reaches the provider's real API, nor the tools that use the provider's variable); else
    the provider's variable, as LiteLLM and `agent doctor` read it."""
    from agent.model.keys import KEYLESS, PROVIDER_KEYS

    provider = model.split("/", 1)[0] if "/" in model else "openai"
    if provider in KEYLESS:
        return None
    if api_base:
        return LLM_KEY_ENV
    return PROVIDER_KEYS.get(provider, LLM_KEY_ENV)


def owner_ids(values: tuple[str, ...]) -> dict[str, str]:
    """`--owner-id` values: `telegram:ID`, `discord:ID`, or a bare ID for every channel set
    up (an @username is Telegram's alone)."""
    found: dict[str, str] = {}
    for value in values:
        channel, colon, ident = value.rpartition(":")
        if colon and channel not in OWNER_PROBLEMS:
            raise click.BadParameter(
                f"{value!r}: the channel is telegram or discord", param_hint="--owner-id"
            )
        names = [channel] if colon else ["telegram"] if ident.startswith("@") else [*OWNER_PROBLEMS]
        for name in names:
            problem = OWNER_PROBLEMS[name](ident)
            if problem is not None:
                raise click.BadParameter(f"{value!r}: {problem}", param_hint="--owner-id")
            found[name] = ident
    return found
