"""What pinclaw learned about models, per model, and remembered in state.db (its
`provider_quirks` table): where a model takes the channel's delivery instructions, whether
it refuses `tools=`, and what its server said about it (its window, its time to the first
token: `agent doctor --check-model`).

Decided by what was refused, not by the wording of the refusal: a 400 on a request that
carried a system message after the user turn moves the instructions into the user turn (as
a marked operator note) and tries once more; a 400 that names tools or functions moves the
model to the `<tool_call>` text protocol, as a model whose built-in profile has no native
tool calls starts (agent/model/profiles/builtin.py). Each lesson is logged once, kept
across restarts and listed by `agent doctor`; the prompt is built with them: `about(model)`
hands them to the profile lookup (agent/model/profiles/lookup.py) as plain data. The daemon
reads and writes them through StateDB (`load`); a command that only reads them (`agent
prompt show`, `agent doctor`) reads `learned_rows` through agent/durable/store.py's read_state.
"""

from __future__ import annotations

import logging
import sqlite3
import time
from collections.abc import Iterable
from typing import Literal

from agent.durable.file.state_db import StateDB
from agent.model.profiles.builtin import builtin_profile
from agent.model.profiles.lookup import FACT_FIRST_TOKEN, FACT_SERVER, FACT_WINDOW

log = logging.getLogger(__name__)

Placement = Literal["after_user", "in_user", "system_prompt"]

SCHEMA = """
CREATE TABLE IF NOT EXISTS provider_quirks (
    model TEXT NOT NULL,
    quirk TEXT NOT NULL,
    value TEXT NOT NULL,
    learned_at REAL NOT NULL,
    PRIMARY KEY (model, quirk)
);
"""
_ROWS = "SELECT model, quirk, value FROM provider_quirks"


def learned_rows(conn: sqlite3.Connection) -> list[tuple[str, str, str]]:
    """(model, quirk, value) as stored, for `LearnedModelFacts(rows)`."""
    return [tuple(row) for row in conn.execute(_ROWS).fetchall()]


class TextProtocolModels(set[str]):
    """The models that get the `<tool_call>` text protocol: those that taught it, and
    those whose built-in profile has no native tool calls (they would only refuse once)."""

    def __contains__(self, model: object) -> bool:
        learned = super().__contains__(model)
        return learned or (isinstance(model, str) and not builtin_profile(model).native_tools)


class LearnedModelFacts:
    def __init__(
        self, rows: Iterable[tuple[str, str, str]] = (), db: StateDB | None = None
    ) -> None:
        """`rows`: (model, quirk, value) as stored; `db`: where new lessons are kept (None:
        remembered for this run only)."""
        self._db = db
        self.placement: dict[str, Placement] = {}
        self.xml_tools = TextProtocolModels()
        self.facts: dict[str, dict[str, str]] = {}  # model -> what its server said
        self._learned: dict[str, dict[str, str]] = {}  # model -> every quirk, as stored
        for model, quirk, value in rows:
            self._learned.setdefault(model, {})[quirk] = value
            if quirk == "delivery" and value in ("in_user", "system_prompt"):
                self.placement[model] = value  # type: ignore[assignment]
            elif quirk == "tools" and value == "xml":
                self.xml_tools.add(model)
            elif quirk in (FACT_WINDOW, FACT_FIRST_TOKEN, FACT_SERVER):
                self.facts.setdefault(model, {})[quirk] = value

    @classmethod
    async def load(cls, db: StateDB) -> LearnedModelFacts:
        return cls(await db.fetchall(_ROWS), db)

    def about(self, model: str) -> dict[str, str]:
        """Everything learned about `model` (quirk -> value, as stored), for the profile
        lookup (agent/model/profiles/lookup.py's profile_for)."""
        return dict(self._learned.get(model, {}))

    async def learn_placement(self, model: str, placement: Placement) -> None:
        where = placement.replace("_", " ")
        log.warning(
            "%s refused the delivery instructions after the user turn; they now go %s "
            "for this model",
            model,
            where,
        )
        self.placement[model] = placement
        await self._store(model, "delivery", placement)

    async def learn_xml_tools(self, model: str) -> None:
        log.warning("%s refused tools=; it now gets the <tool_call> text protocol", model)
        self.xml_tools.add(model)
        await self._store(model, "tools", "xml")

    async def learn_fact(self, model: str, name: str, value: str) -> None:
        """What a model's server said about it (agent/model/server_probe.py): kept for the
        next start's prompt, which is built for the window the server gives."""
        if name == "tools" and value == "xml":
            self.xml_tools.add(model)
        else:
            self.facts.setdefault(model, {})[name] = value
        await self._store(model, name, value)

    def lines(self) -> list[str]:
        """What was learned, one line per model and lesson, for `agent doctor`."""
        found = [
            f"{model}: delivery instructions {where.replace('_', ' ')}"
            for model, where in sorted(self.placement.items())
        ]
        found += [
            f"{model}: tools through the <tool_call> text protocol"
            for model in sorted(self.xml_tools)
        ]
        for model, facts in sorted(self.facts.items()):
            said = [f"served by {facts[FACT_SERVER]}"] if FACT_SERVER in facts else []
            if FACT_WINDOW in facts:
                said.append(f"a window of {int(float(facts[FACT_WINDOW])):,} tokens")
            if FACT_FIRST_TOKEN in facts:
                said.append(f"first token after {float(facts[FACT_FIRST_TOKEN]):.1f} s")
            found.append(f"{model}: {', '.join(said)}")
        return found

    async def _store(self, model: str, quirk: str, value: str) -> None:
        self._learned.setdefault(model, {})[quirk] = value
        if self._db is None:
            return
        row = (model, quirk, value, time.time())
        try:
            await self._db.write(
                lambda conn: conn.execute(
                    "INSERT INTO provider_quirks VALUES (?, ?, ?, ?) ON CONFLICT (model, quirk)"
                    " DO UPDATE SET value = excluded.value, learned_at = excluded.learned_at",
                    row,
                )
            )
        except sqlite3.Error as exc:  # remembered for this run all the same
            log.warning("provider quirk not stored: %s", exc)
