"""Several tools offered to the model as one, told apart by an `action` argument.

Every schema in `tools=` costs its wrapping (name, description, `parameters`, `properties`,
`required`: some 35 tokens) however little it says, and a small model on a home server
reads the first request at 60–70 tokens a second: the three memory tools offered as one
`memory` tool, the three schedule tools as one `schedule` tool, save 140 tokens of every
request in compact mode and 260 in full mode (nanobot's `cron` and Hermes Agent's `memory`
are offered the same way).

The members stay registered tools, each with its own rules. A call of a group becomes its
member's call before anything judges it (`ToolRegistry.member_call`): approvals, the taint
gate, read-only mode, the journal and the repeat rules see `memory_store`, not `memory`,
as before. The model's own call stays in the history as it wrote it, and a member called by
its own name still runs.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, cast

from tools.base import Tool, ToolCallContext, ToolResult

ACTION = "action"


@dataclass(frozen=True)
class Action:
    """One action of a group: the member tool it calls, the group's arguments it takes
    under other names (`{"text": "content"}`: the group's `text` is memory_store's
    `content`), and the group's arguments it cannot do without (`needs`)."""

    member: str
    renamed: Mapping[str, str] = field(default_factory=dict)
    needs: tuple[str, ...] = ()


class ToolGroup:
    """A tool offered in the members' place; `parameters`: `action` (one of `actions`)
    first, then the arguments the actions take, the ones each action needs described."""

    def __init__(
        self,
        name: str,
        description: str,
        actions: Mapping[str, Action],
        arguments: Mapping[str, dict[str, Any]],
        *,
        tools: Sequence[Tool],
        required: tuple[str, ...] = (),
    ) -> None:
        """`tools`: the members themselves, which judge the arguments their actions get."""
        self.name = name
        self.description = description
        self.actions = dict(actions)
        self.members = frozenset(action.member for action in self.actions.values())
        self._tools = {item.name: item for item in tools if item.name in self.members}
        if missing := self.members - self._tools.keys():
            raise ValueError(f"group {name!r}: no tool given for {', '.join(sorted(missing))}")
        choice = {"type": "string", "enum": list(self.actions)}
        self.parameters: dict[str, Any] = {
            "properties": {ACTION: choice, **arguments},
            "required": [ACTION, *required],
            "type": "object",
        }

    def member_arguments(
        self, args: dict[str, Any], registered: Callable[[str], Tool | None]
    ) -> tuple[str, dict[str, Any]] | None:
        """The member and its arguments for a call of this group with `args` (None: no
        action fits, the call lacks what its action needs or gives what its member cannot
        take, or its member is not registered; the group's own run then says what is wrong
        in the group's words, not the member's).
        An argument the member does not take is left out: a model asked to list schedules
        may still send an empty `task`."""
        action = self.actions.get(str(args.get(ACTION, "")).strip().lower())
        member = registered(action.member) if action is not None else None
        if action is None or member is None or _lacking(action, args):
            return None
        moved = _moved(action, args, member)
        if _invalid(self._tools[action.member], action, moved):
            return None
        return action.member, moved

    async def run(self, args: dict[str, Any], call: ToolCallContext) -> ToolResult:
        """Reached only when no action fits, or the call lacks what its action needs or
        gives it what its member cannot take (a fitting call runs its member instead)."""
        name = str(args.get(ACTION, "")).strip().lower()
        action = self.actions.get(name)
        if action is not None and (lacking := _lacking(action, args)):
            needed = " and ".join(f"`{key}`" for key in lacking)
            return ToolResult.error(f"{self.name} {name} needs {needed}; add it and call again")
        if action is not None:
            member = self._tools[action.member]
            if wrong := _invalid(member, action, _moved(action, args, member)):
                return ToolResult.error(f"{self.name} {name}: {wrong}; fix it and call again")
        given = json.dumps(args.get(ACTION)) if ACTION in args else "none"
        return ToolResult.error(
            f"{self.name} needs `{ACTION}`, one of {', '.join(self.actions)} (got {given})"
        )


def _moved(action: Action, args: dict[str, Any], member: Tool) -> dict[str, Any]:
    """The group's arguments under the member's names, those it does not take left out."""
    takes = (member.parameters.get("properties") or {}).keys()
    moved = {action.renamed.get(key, key): value for key, value in args.items()}
    return {key: value for key, value in moved.items() if key in takes}


def _invalid(member: Tool, action: Action, args: dict[str, Any]) -> str | None:
    """What the member would refuse in `args` (a list where it takes a string, say), in
    the group's names for its arguments; None: taken, or the member does not tell."""
    check = getattr(member, "invalid", None)
    if check is None:
        return None
    ours = {theirs: group for group, theirs in action.renamed.items()}
    return cast("str | None", check(args, ours))


def _lacking(action: Action, args: dict[str, Any]) -> list[str]:
    """What `action` needs that `args` leaves out or gives empty."""
    return [key for key in action.needs if args.get(key) in (None, "")]
