"""`agent doctor` catches the common mistakes of a first setup, each with its fix in the same
line: a bot token of the wrong shape, a model name LiteLLM cannot route, a key the provider
needs (or does not), a server that does not answer, a home not the owner's alone, a sandbox
or package that is missing. Each test runs the real command and reads its lines.
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest
from daemon_process import agent, without_pyserial, without_system_programs
from fakes.firmata_board import FirmataBoard
from fakes.llm_server import FakeLLM

CLOSED = "http://127.0.0.1:9/v1"


def doctor(env: dict[str, str]) -> subprocess.CompletedProcess[str]:
    return agent("doctor", env=env, umask=0o022)


def lines(result: subprocess.CompletedProcess[str]) -> list[str]:
    return result.stdout.splitlines()


def test_bot_tokens_of_the_wrong_shape_are_said_with_where_to_copy_them_again(
    llm_env: dict[str, str],
) -> None:
    env = {
        **llm_env,
        "PINCLAW_CHANNELS__TELEGRAM__ENABLED": "true",
        "PINCLAW_CHANNELS__TELEGRAM__BOT_TOKEN": "bot123456:AAH-not-35-characters",
        "PINCLAW_CHANNELS__TELEGRAM__ALLOWED_USERS": '["42"]',
        "PINCLAW_CHANNELS__DISCORD__ENABLED": "true",
        "PINCLAW_CHANNELS__DISCORD__BOT_TOKEN": "MTIzNDU2Nzg5MDEyMzQ1Njc4.only-two",
        "PINCLAW_CHANNELS__DISCORD__ALLOWED_USERS": '["111"]',
    }
    result = doctor(env)
    assert result.returncode == 1
    assert (
        "FAIL telegram: enabled, but the token is not in BotFather's form <digits>:<35 "
        "characters> (drop the 'bot' in front); copy it whole from @BotFather into "
        "PINCLAW_CHANNELS__TELEGRAM__BOT_TOKEN"
    ) in lines(result)
    assert (
        "FAIL discord: enabled, but the token is not three parts joined by dots; copy it again "
        "from the Developer Portal's Bot tab into PINCLAW_CHANNELS__DISCORD__BOT_TOKEN"
    ) in lines(result)
    assert "AAH-not" not in result.stdout and "only-two" not in result.stdout


def test_well_formed_tokens_pass(llm_env: dict[str, str]) -> None:
    env = {
        **llm_env,
        "PINCLAW_CHANNELS__TELEGRAM__ENABLED": "true",
        "PINCLAW_CHANNELS__TELEGRAM__BOT_TOKEN": "123456789:" + "A" * 30 + "b_c-d",
        "PINCLAW_CHANNELS__TELEGRAM__ALLOWED_USERS": '["42"]',
        "PINCLAW_CHANNELS__DISCORD__ENABLED": "true",
        "PINCLAW_CHANNELS__DISCORD__BOT_TOKEN": "MTIzNDU2Nzg5MDEy.GaBcDe.abcdefghij_qrs-tu",
        "PINCLAW_CHANNELS__DISCORD__ALLOWED_USERS": '["111"]',
    }
    found = lines(doctor(env))
    assert "ok  telegram: enabled, token present" in found
    assert "ok  discord: enabled, token present" in found
    assert (
        "note telegram: no owner in [people] (owner = true, telegram = your id), so a question "
        "asked after untrusted content (a web page, someone else's file) is answered in its chat "
        "by any allowed person, not by you alone"
    ) in found
    owned = lines(
        doctor({**env, "PINCLAW_PEOPLE__ME__TELEGRAM": "42", "PINCLAW_PEOPLE__ME__OWNER": "true"})
    )
    assert not any(line.startswith("note telegram: no owner") for line in owned)
    assert any(line.startswith("note discord: no owner") for line in owned)


def test_a_model_name_litellm_cannot_route_is_said_with_the_form_to_use(
    llm_env: dict[str, str],
) -> None:
    """(At a server of one's own a bare name is the server's name for its model.)"""
    result = doctor({**llm_env, "PINCLAW_LLM__MODEL": "llama3", "PINCLAW_LLM__API_BASE": ""})
    assert result.returncode == 1
    assert (
        "FAIL model: llm.model 'llama3' names no provider LiteLLM knows: write it as "
        "provider/model, e.g. openai/gpt-4o-mini, anthropic/claude-sonnet-4-5 or "
        "ollama_chat/llama3.1"
    ) in lines(result)
    assert not any(line.startswith(("ok  api key", "FAIL api key")) for line in lines(result))


def test_an_ollama_model_needs_no_key(llm_env: dict[str, str]) -> None:
    env = {**llm_env, "PINCLAW_LLM__MODEL": "ollama_chat/llama3.1", "OPENAI_API_KEY": ""}
    env["PINCLAW_LLM__API_BASE"] = ""  # (the environment of the test has one)
    found = lines(doctor(env))
    assert "ok  model: ollama_chat/llama3.1 (ollama_chat at http://localhost:11434)" in found
    assert "ok  api key: no key needed (ollama_chat)" in found


def test_a_local_openai_compatible_server_needs_a_key_only_through_litellm(
    llm_env: dict[str, str], fake_llm: FakeLLM
) -> None:
    base = fake_llm.base_url
    direct = doctor({**llm_env, "OPENAI_API_KEY": ""})
    assert lines(direct)[2:5] == [
        f"ok  model: openai/test-model (openai at {base})",
        "ok  api key: not needed (a server of your own; set PINCLAW_LLM__API_KEY if it checks one)",
        f"ok  api base: {base} answers (HTTP 200 for /models)",
    ]
    result = doctor({**llm_env, "OPENAI_API_KEY": "", "PINCLAW_LLM__CLIENT": "litellm"})
    assert result.returncode == 1
    assert lines(result)[2:5] == [
        f"ok  model: openai/test-model (openai at {base})",
        f"FAIL api key: the OpenAI client sends a key even to {base}: set PINCLAW_LLM__API_KEY "
        "to its key, or to any text (e.g. dummy) if that server checks none",
        f"ok  api base: {base} answers (HTTP 200 for /models)",
    ]


def test_a_missing_provider_key_says_where_it_goes(llm_env: dict[str, str], home: Path) -> None:
    env = {**llm_env, "PINCLAW_LLM__MODEL": "anthropic/claude-x", "ANTHROPIC_API_KEY": ""}
    env["PINCLAW_LLM__API_BASE"] = ""  # (the environment of the test has one)
    assert (
        "FAIL api key: no API key: set ANTHROPIC_API_KEY (or PINCLAW_LLM__API_KEY) in your "
        f"shell or in {home / 'agent.env'}"
    ) in lines(doctor(env))


def test_an_api_base_that_does_not_answer_is_said_in_one_line(llm_env: dict[str, str]) -> None:
    result = doctor({**llm_env, "PINCLAW_LLM__API_BASE": CLOSED})
    assert result.returncode == 1
    assert (
        f"FAIL api base: {CLOSED} does not answer ([Errno 111] Connection refused); start its "
        "server or correct llm.api_base"
    ) in lines(result)


def test_an_api_base_with_a_password_is_said_without_it(llm_env: dict[str, str]) -> None:
    """A server behind basic auth is set as http://user:password@host/v1; the password is
    no configured token, so the scrubber does not know it: doctor's every line masks it."""
    result = doctor({**llm_env, "PINCLAW_LLM__API_BASE": "http://me:Pw-7zq-x@127.0.0.1:9/v1"})
    assert "Pw-7zq-x" not in result.stdout + result.stderr
    assert "FAIL api base: http://me:***@127.0.0.1:9/v1 does not answer" in result.stdout


def test_a_loose_home_is_tightened_and_then_found_the_owners_alone(
    llm_env: dict[str, str], home: Path
) -> None:
    assert agent("init", env=llm_env).returncode == 0
    home.chmod(0o755)
    (home / "config.toml").chmod(0o644)
    result = doctor(llm_env)
    assert result.stderr == (
        f"pinclaw: tightened the modes of {home} (was 0755): config.toml (was 0644); now only "
        "its owner can read them\n"
    )
    assert f"ok  home: {home} (0700, its private files 0600, all yours)" in lines(result)


@pytest.mark.skipif(os.geteuid() != 0, reason="giving a file to another uid takes root")
def test_private_files_of_another_user_are_named_with_the_fix(
    llm_env: dict[str, str], home: Path
) -> None:
    assert agent("init", env=llm_env).returncode == 0
    os.chown(home / "config.toml", 65534, 65534)  # as a `sudo agent ...` of another user left it
    result = doctor(llm_env)
    assert result.returncode == 1
    assert (
        f"FAIL home: config.toml belongs to uid 65534, not you; give them back: sudo chown -R "
        f"root {home} (pinclaw then keeps them 0700 and 0600)"
    ) in lines(result)


def test_a_sandbox_required_but_missing_says_how_to_get_one(
    llm_env: dict[str, str], tmp_path: Path
) -> None:
    no_bwrap = {"PYTHONPATH": without_system_programs(tmp_path)}
    env = {**llm_env, "PINCLAW_SECURITY__SANDBOX": "bubblewrap", **no_bwrap}
    assert (
        'FAIL sandbox: sandbox is "bubblewrap" but no bwrap in the system folders '
        '(install bubblewrap), or set sandbox = "auto" under [security]'
    ) in lines(doctor(env))


def test_a_board_without_pyserial_says_what_to_install(
    llm_env: dict[str, str], emulator: FirmataBoard, tmp_path: Path
) -> None:
    env = {
        **llm_env,
        "PYTHONPATH": without_pyserial(tmp_path),
        "PINCLAW_HARDWARE__ENABLED": "true",
        "PINCLAW_HARDWARE__PORT": str(emulator.path),
    }
    result = doctor(env)
    assert (result.returncode, result.stderr) == (1, "")
    assert (
        "FAIL board: the Arduino board needs the Python package pyserial, which is not "
        f"installed here; install it: {sys.executable} -m pip install pyserial"
    ) in lines(result)


def test_a_workspace_path_that_names_a_file_is_said_so(
    llm_env: dict[str, str], tmp_path: Path
) -> None:
    """Not "does not exist; run `agent init`": init cannot make a folder where a file is."""
    notes = tmp_path / "notes.md"
    notes.write_text("my notes\n")
    result = doctor({**llm_env, "PINCLAW_WORKSPACE__PATH": str(notes)})
    line = f"FAIL workspace: {notes} is a file, not a folder; set [workspace] path to a folder"
    assert line in lines(result), result.stdout
