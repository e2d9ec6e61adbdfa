"""A turn's model as the owner's controls shape it: the chat's own model (`/model`), every
call kept in the usage table with who and what it was for, and no call made past a budget.

`OwnerControls.for_turn` gives the turn a `MeteredModel` — a ModelClient in front of the
app's — or, when a limit stops this kind of turn, `Refused` with the one line that says so
(no model is called).
Before each call the budget is read again, so a turn that spends past a limit stops at its
next call (BudgetSpent, which the turn ends with); after each, its row is written and the
owner told when a limit reaches 80 % or is spent.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Mapping
from dataclasses import dataclass

from agent.config import PersonSettings
from agent.conversation.scopes import OWNER, Audience
from agent.durable.file.state_db import StateDB
from agent.durable.owner.chat_models import ChatModels
from agent.durable.owner.usage import Call, StartedBy, UsageBook
from agent.durable.triggers import Trigger
from agent.model.responses import (
    BudgetSpent,
    LLMResponse,
    Message,
    ModelClient,
    OnRetry,
    OnText,
    ProviderHealth,
    Tools,
)
from agent.runtime.owner.budget import Budget, Standing
from agent.runtime.turn_setup import TurnSetup
from channels.base import IncomingMessage
from tools.proactive.schedule_times import zone_named

log = logging.getLogger(__name__)

_STARTS: dict[str, StartedBy] = {
    "scheduled": "schedule",
    "heartbeat": "heartbeat",
    "pin": "watch",
    "webhook": "webhook",
}


@dataclass(frozen=True)
class Refused:
    """A turn a limit stops before any model is called: the line the person is told."""

    reason: str


@dataclass(frozen=True)
class Spender:
    """Whom a turn's calls are counted for: the chat, the person, what started it."""

    chat_key: str
    person: str
    started_by: StartedBy


def spender_of(
    msg: IncomingMessage,
    trigger: Trigger | None,
    audience: Audience,
    people: Mapping[str, PersonSettings],
) -> Spender:
    """The person is their [people] name (the owner's for the terminal and the heartbeat),
    else channel:id; one-shots' throwaway chats count as one, "cli:oneshot"."""
    terminal = msg.chat.channel == "cli"
    scope = audience.person
    if scope == OWNER:
        person = next((name for name, p in people.items() if p.owner), "owner")
    else:
        person = scope.removeprefix("person:")
    chat_key = "cli:oneshot" if msg.chat.key.startswith("cli:oneshot:") else msg.chat.key
    started_by: StartedBy = "one-shot" if terminal else "message"
    if trigger is not None:
        started_by = _STARTS[trigger.kind]
    return Spender(chat_key, person, started_by)


class MeteredModel:
    """The app's model for one turn: asks the chat's model first, keeps each call's usage,
    stops at a spent budget, and past `budget.max_tokens_per_turn` of calls without a price."""

    def __init__(
        self, inner: ModelClient, model: str, spender: Spender, controls: OwnerControls
    ) -> None:
        self._inner = inner
        self.health: ProviderHealth = inner.health  # the provider's, as /status reads it
        self._model = model
        self._spender = spender
        self._controls = controls
        self.unpriced_tokens = 0  # this turn's tokens to models without a price

    @property
    def model(self) -> str:
        return self._model

    async def complete(
        self,
        messages: list[Message],
        *,
        tools: Tools = None,
        on_text: OnText = None,
        on_retry: OnRetry = None,
        model: str | None = None,
    ) -> LLMResponse:
        budget = self._controls.budget
        standing = await budget.standing()
        stop = standing.refusal(self._spender.started_by) or self._over_tokens(standing)
        if stop is not None:
            raise BudgetSpent(stop)
        response = await self._inner.complete(
            messages, tools=tools, on_text=on_text, on_retry=on_retry, model=model or self._model
        )
        if response.cost_usd is None:
            self.unpriced_tokens += response.prompt_tokens + response.completion_tokens
        spender = self._spender
        call = Call(
            time.time(),
            spender.chat_key,
            spender.person,
            spender.started_by,
            response.model,
            response.prompt_tokens,
            response.cached_tokens,
            response.completion_tokens,
            response.cost_usd,
        )
        try:
            await self._controls.usage.record(call)
            await budget.after_call()
        except Exception as exc:  # the answer is paid for and here: keeping count is second
            log.warning("%s: a model call's usage was not kept: %s", spender.chat_key, exc)
        return response

    def _over_tokens(self, standing: Standing) -> str | None:
        cap = int(standing.limits["tokens"])
        if cap <= 0 or self.unpriced_tokens < cap:
            return None
        return (
            f"Stopped: this answer used {self.unpriced_tokens:,} tokens of a model without a "
            f"price, past budget.max_tokens_per_turn ({cap:,}). The owner can raise it with "
            "/budget tokens AMOUNT."
        )


@dataclass(frozen=True)
class OwnerControls:
    """The owner's controls over the model: the budget, the usage kept, each chat's model
    among the configured ones. All of it lives in state.db, so each runtime may hold its own;
    the settings are the setup's at each use (as they are now, after a reload too)."""

    budget: Budget
    usage: UsageBook
    models: ChatModels
    setup: TurnSetup

    @classmethod
    def of(cls, setup: TurnSetup, db: StateDB) -> OwnerControls:
        """The controls over state.db; days and months in the prompt's time zone."""
        budget = Budget(lambda: setup.settings.budget, db, zone_named(setup.source.timezone))
        return cls(budget, UsageBook(db), ChatModels(db), setup)

    def configured(self) -> list[str]:
        """The models a chat may be switched to, the main one first."""
        return self.setup.settings.llm.configured_models

    async def model_of(self, chat_key: str, default: str) -> str:
        """The chat's own model while it is still configured, else `default`."""
        chosen = await self.models.get(chat_key)
        return chosen if chosen is not None and chosen in self.configured() else default

    async def for_turn(
        self, llm: ModelClient, msg: IncomingMessage, trigger: Trigger | None, audience: Audience
    ) -> ModelClient | Refused:
        """This turn's model, or the line that says a limit stops it (nothing is called)."""
        spender = spender_of(msg, trigger, audience, self.setup.settings.people)
        refusal = await self.budget.refusal(spender.started_by)
        if refusal is not None:
            return Refused(refusal)
        return MeteredModel(llm, await self.model_of(msg.chat.key, llm.model), spender, self)
