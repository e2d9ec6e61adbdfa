"""`/model` end to end: the daemon with the real Telegram adapter on the fake Bot API and
LiteLLM on the fake provider. A chat lists the configured models (llm.model, the fallbacks,
llm.choices), switches to one — the next request names it, the usage row too, other chats
keep theirs, a restart keeps it — and goes back with `/model reset`; a name that is not
configured is refused, and a stranger's /model changes nothing."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from conftest import TEST_MODEL, Daemon, eventually
from daemon_process import rows
from fakes.llm_server import FakeLLM, Outcome, last_user_content, text
from fakes.telegram_server import FakeTelegram

from agent.runtime.queues.outage import OUTAGE_NOTICE

OWNER, CAROL, STRANGER = 42, 7, 99
CHOSEN = "openai/gpt-4o-mini"
FALLBACK = "openai/fallback-model"


def respond(body: dict[str, Any]) -> Outcome:
    return text("re: " + str(last_user_content(body)).splitlines()[-1])


@pytest.fixture
def models_env(telegram_env: dict[str, str], monkeypatch: pytest.MonkeyPatch) -> dict[str, str]:
    values = {
        "PINCLAW_LLM__FALLBACK_MODELS": f'["{FALLBACK}"]',
        "PINCLAW_LLM__CHOICES": f'["{CHOSEN}"]',
        "PINCLAW_PEOPLE": '{"me": {"telegram": "42", "owner": true}}',
    }
    for name, value in values.items():
        monkeypatch.setenv(name, value)
    return {**telegram_env, **values}


class Chat:
    """One person's private chat with the bot: say something, get the bot's next line."""

    def __init__(self, fake: FakeTelegram, user: int, username: str = "") -> None:
        self.fake, self.user, self.username = fake, user, username

    def lines(self) -> list[str]:
        sent = self.fake.sent
        return [m.plain or "" for m in sent if m.method == "sendMessage" and m.chat_id == self.user]

    async def ask(self, words: str) -> str:
        before = len(self.lines())
        self.fake.inject_message(self.user, self.user, words, username=self.username)
        await eventually(lambda: len(self.lines()) > before, within=10, what=words)
        return self.lines()[before]


@pytest.mark.both_stores
async def test_a_chat_switches_its_model_keeps_it_across_a_restart_and_goes_back(
    models_env: dict[str, str], fake_llm: FakeLLM, fake_telegram: FakeTelegram, home: Path,
    daemon: Callable[[], Daemon],
) -> None:  # fmt: skip
    fake_llm.responder = respond
    owner, carol = Chat(fake_telegram, OWNER), Chat(fake_telegram, CAROL, "carol")
    stranger = Chat(fake_telegram, STRANGER, "mallory")
    db = home / "state.db"
    async with daemon():
        assert await owner.ask("/model") == "\n".join([
            "Models (/model NAME switches this chat, /model reset goes back):",
            f"  {TEST_MODEL}  ← this chat, default",
            f"  {FALLBACK}",
            f"  {CHOSEN}",
        ])  # fmt: skip
        assert await owner.ask("/model gpt-4o") == (
            f"Not a configured model: gpt-4o. Configured: {TEST_MODEL}, {FALLBACK}, {CHOSEN}."
        )
        assert await owner.ask("/model gpt-4o-mini") == f"This chat now uses {CHOSEN}."
        assert await owner.ask("hello") == "re: hello"
        assert fake_llm.requests[-1]["model"] == "gpt-4o-mini"
        assert await carol.ask("hello from carol") == "re: hello from carol"
        assert fake_llm.requests[-1]["model"] == "test-model"  # her chat kept the default
        assert (await owner.ask("/status")).startswith(f"Model: {CHOSEN} (")
        refused = await stranger.ask(f"/model {FALLBACK}")  # answered as any stranger is
        assert "This chat" not in refused and FALLBACK not in refused  # (chat_models below)
        fake_llm.fail_model("gpt-4o-mini")  # the chosen one fails: the configured chain follows
        # three failed calls, then the fallback answers within the 10 s after which an
        # outage is told (agent.outage_notice_after_s): nobody hears of it
        assert await owner.ask("still there?") == "re: still there?"
        assert OUTAGE_NOTICE not in owner.lines()
        assert [r["model"] for r in fake_llm.requests[-4:]] == ["gpt-4o-mini"] * 3 + ["test-model"]
        fake_llm.heal_model("gpt-4o-mini")
    assert rows(db, "SELECT chat_key, model FROM chat_models") == [(f"telegram:{OWNER}:", CHOSEN)]
    async with daemon():  # a restart: the choice is kept
        assert await owner.ask("hello again") == "re: hello again"
        assert fake_llm.requests[-1]["model"] == "gpt-4o-mini"
        assert (await owner.ask("/model")).splitlines()[1:] == [
            f"  {TEST_MODEL}  ← default",
            f"  {FALLBACK}",
            f"  {CHOSEN}  ← this chat",
        ]
        assert await owner.ask("/model reset") == f"This chat uses {TEST_MODEL} again."
        assert await owner.ask("and now?") == "re: and now?"
        assert fake_llm.requests[-1]["model"] == "test-model"
    models = rows(db, "SELECT chat_key, model FROM usage ORDER BY id")
    assert models == [
        (f"telegram:{OWNER}:", CHOSEN),
        (f"telegram:{CAROL}:", TEST_MODEL),
        (f"telegram:{OWNER}:", TEST_MODEL),  # answered by the chain after the chosen one failed
        (f"telegram:{OWNER}:", CHOSEN),
        (f"telegram:{OWNER}:", TEST_MODEL),
    ]
    assert rows(db, "SELECT COUNT(*) FROM chat_models") == [(0,)]
