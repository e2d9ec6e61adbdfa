"""The owner's question before a tainted turn sends data out or changes what lasts.

Once a turn has read words the owner did not write (tools/taint.py), the model may be
following them. Actions that could carry the owner's data away or leave a lasting change
then need the owner's yes at every autonomy level, and the question names what was read:

- web_fetch anywhere but where the owner's own words in this turn pointed (a host and port
  they named, without a query; or the very URL): data rides in URLs;
- web_search (the query goes to the search provider);
- an MCP tool, unless its server is one the owner marked `trusted` and the tool only reads;
- a skill's tool (a script may reach anywhere its sandbox lets it);
- every other tool that changes the world: schedules, pin watches, pins, forgetting.

Not here: the shell asks for itself (tools/shell: offline unless approved), and so do the
file tools before a change to a file that shapes later prompts (tools/files.py: the
identity files, skills, an AIEOS identity, and in a tainted turn MEMORY.md and USER.md;
also in any turn not the owner's own private one); memory_store keeps what it stores as
unvetted instead of asking (tools/memory), and other file writes are recorded as written
after untrusted content (agent/durable/file_sources.py). Reading stays free: file_read,
memory_recall, web results already fetched, gpio_read, the lists.

"Always allow" remembers the tool after each source it was asked after, so the owner can
let one kind of action through after one source ("web_fetch of example.org after reading
example.org/page") without opening it to every page.
"""

from __future__ import annotations

import dataclasses
from typing import Any

from tools.base import (
    ApprovalRequest,
    ReadOnlyRefusal,
    Tool,
    ToolCallContext,
    ToolResult,
    has_effects,
    not_approved,
)
from tools.taint import host_of

# Kept as unvetted (memory), or gated inside the tool itself (the shell, the file tools).
_OWN_RULES = frozenset({"memory_store", "shell", "file_write", "file_edit"})


async def ask_if_tainted(
    tool: Tool, args: dict[str, Any], call: ToolCallContext
) -> ToolCallContext | ToolResult:
    """The context the call runs with, or the refusal the model gets (the owner said no, or
    nobody could be asked). Once the owner approved this very call, the tool's own question
    about it (an MCP tool's) is not asked a second time."""
    request = question(tool, args, call)
    if request is None:
        return call
    if await call.ask(request):
        return dataclasses.replace(call, approve=_already_approved)
    return ToolResult.error(not_approved(tool.name, request.reason, tainted=True))


async def _already_approved(request: ApprovalRequest) -> bool:
    return True


def question(tool: Tool, args: dict[str, Any], call: ToolCallContext) -> ApprovalRequest | None:
    """What to ask the owner before this call (None: nothing to ask)."""
    taint = call.taint
    if isinstance(tool, ReadOnlyRefusal) or tool.name in _OWN_RULES:
        return None  # refused anyway, or the tool's own rule
    if not taint.tainted:
        return None
    what = _sends_or_lasts(tool, args, call)
    if what is None:
        return None
    action, kind = what
    sources = taint.sources
    return ApprovalRequest(
        tool.name,
        action,
        f"{kind}, {taint.why()}",
        tuple(f"after {source}: {tool.name}" for source in sources),
        always_covers=f"{tool.name} after reading {', '.join(sources)}",
        owner_only=True,
    )


def _sends_or_lasts(
    tool: Tool, args: dict[str, Any], call: ToolCallContext
) -> tuple[str, str] | None:
    """The action as the owner reads it and why it matters, for a call that may send data
    out or change what lasts; None for one that only reads."""
    name = tool.name
    if name == "web_fetch":
        url = str(args.get("url", ""))
        if call.taint.named_by_owner(url):
            return None
        host = host_of(url) or "a host"  # "" for a malformed URL too
        return f"fetch {url}", f"the address goes to {host} with whatever it holds"
    if name == "web_search":
        return f"search for {args.get('query', '')!r}", "the query goes to the search provider"
    link = getattr(tool, "link", None)
    if link is not None:  # an MCP server's tool (tools/mcp/tool.py)
        if getattr(link.settings, "trusted", False) and not has_effects(tool):
            return None
        shown = ", ".join(f"{k}={v!r}" for k, v in args.items())  # whole: approvals.py cuts
        return f"{name}({shown})", f"the MCP server {link.name} gets the arguments"
    if getattr(tool, "spec", None) is not None:  # a skill's tool (tools/skills/skill_tools.py)
        return f"{name} {args}", "a skill's script may change things or reach out"
    if has_effects(tool):
        shown = ", ".join(f"{k}={v!r}" for k, v in args.items())  # whole: approvals.py cuts
        return f"{name}({shown})", "it changes what lasts"
    return None
