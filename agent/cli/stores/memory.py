"""`agent memory list|search|vet|forget|export|import`: the owner's view of the memory store.

The terminal is the owner: every scope is visible unless `--scope` narrows it. Nothing
heavy is imported until a command runs (`agent --help` stays fast).
"""

from __future__ import annotations

import json
import sys
import time
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import IO, TYPE_CHECKING, Any, TypeVar

import click

if TYPE_CHECKING:
    from tools.memory.store import Memory, MemoryStore

T = TypeVar("T")

SCOPE_HELP = "Only this scope (repeat for several), e.g. person:owner."


def _run(ctx: click.Context, work: Callable[[MemoryStore], Awaitable[T]]) -> T:
    """`work(store)` on the configured home's memories (a bad config exits 2 in the loader
    main.py gives): state.db's, or with [state] url PostgreSQL's, opened for it and closed."""
    import asyncio  # here, not at the top: `agent --help` does not pay for it

    from agent.conversation.memories import memory_store
    from agent.durable.store import open_store

    settings = ctx.obj["load"](ctx)

    async def run() -> T:
        url = settings.state_url
        shared = await open_store(settings.state_db, url=url) if url else None
        store = memory_store(settings, shared.db if shared is not None else None)
        try:
            return await work(store)
        finally:
            await store.close()
            if shared is not None:
                await shared.close()

    return asyncio.run(run())


def _line(memory: Memory, *, score: bool = False) -> str:
    day = time.strftime("%Y-%m-%d", time.localtime(memory.updated_at))
    tags = f"  [{', '.join(memory.tags)}]" if memory.tags else ""
    head = f"{memory.score:.2f}  " if score else ""
    unvetted = f"  (unvetted: kept {memory.unvetted})" if memory.unvetted else ""
    return f"{head}#{memory.id}  {memory.scope}  {day}{tags}{unvetted}  {memory.content}"


def _scopes(scope: tuple[str, ...]) -> tuple[str, ...] | None:
    return scope or None


@click.group()
def memory() -> None:
    """List, search, delete, export and import the agent's long-term memories."""


@memory.command("list")
@click.option("--scope", "scope", multiple=True, help=SCOPE_HELP)
@click.option("--limit", default=50, show_default=True, help="At most this many, newest first.")
@click.option(
    "--unvetted", is_flag=True, help="Only those kept after untrusted content, to vet or forget."
)
@click.pass_context
def list_memories(ctx: click.Context, scope: tuple[str, ...], limit: int, unvetted: bool) -> None:
    """Show the newest memories."""
    found = _run(ctx, lambda store: store.list(_scopes(scope), limit=limit, unvetted=unvetted))
    for item in found:
        click.echo(_line(item))
    if not found:
        click.echo("No unvetted memories." if unvetted else "No memories.", err=True)


@memory.command()
@click.argument("memory_id", metavar="ID", type=int)
@click.pass_context
def vet(ctx: click.Context, memory_id: int) -> None:
    """Vouch for memory ID, kept by a turn that had read what you did not write: from now on
    it is recalled as any other (`forget` it instead if it is not yours)."""
    found = _run(ctx, lambda store: store.vet(memory_id))
    if found is None:
        click.echo(f"No memory #{memory_id}.", err=True)
        sys.exit(1)
    click.echo(f"Vetted {_line(found)}")


@memory.command()
@click.argument("query")
@click.option("--scope", "scope", multiple=True, help=SCOPE_HELP)
@click.option("--limit", default=10, show_default=True, help="At most this many, best first.")
@click.pass_context
def search(ctx: click.Context, query: str, scope: tuple[str, ...], limit: int) -> None:
    """Find the memories about QUERY, with their scores (0-1)."""

    async def run(store: MemoryStore) -> list[Memory]:
        scopes = scope or tuple(await store.scopes())
        return await store.search(scopes, query, limit=limit)

    found = _run(ctx, run)
    for item in found:
        click.echo(_line(item, score=True))
    if not found:
        click.echo(f"No memory matches {query!r}.", err=True)


@memory.command()
@click.argument("memory_id", metavar="[ID]", type=int, required=False)
@click.option("-q", "--query", help="Words of the memory instead of its id.")
@click.option("--scope", "scope", multiple=True, help=SCOPE_HELP)
@click.pass_context
def forget(
    ctx: click.Context, memory_id: int | None, query: str | None, scope: tuple[str, ...]
) -> None:
    """Delete memory ID, or the one memory matching --query (several: they are listed and
    nothing is deleted)."""
    if (memory_id is None) == (query is None):
        raise click.UsageError("give exactly one of ID or --query")
    result = _run(ctx, lambda store: store.forget(_scopes(scope), id=memory_id, query=query))
    if result.deleted is not None:
        click.echo(f"Forgot {_line(result.deleted)}")
        return
    if result.candidates:
        click.echo("Several memories match; nothing was deleted. Forget one by its id:", err=True)
        for item in result.candidates:
            click.echo(_line(item, score=True))
    else:
        what = f"#{memory_id}" if query is None else f"matches {query!r}"
        click.echo(f"No memory {what}.", err=True)
    sys.exit(1)


@memory.command("export")
@click.option("--scope", "scope", multiple=True, help=SCOPE_HELP)
@click.option(
    "-o",
    "--output",
    type=click.Path(dir_okay=False, path_type=Path),
    help="File (default: stdout).",
)
@click.pass_context
def export_memories(ctx: click.Context, scope: tuple[str, ...], output: Path | None) -> None:
    """Write the memories as JSON lines: id, scope, content, tags, source, dates."""
    rows = _run(ctx, lambda store: store.export(_scopes(scope)))
    text = "".join(json.dumps(row, ensure_ascii=False) + "\n" for row in rows)
    if output is None:
        sys.stdout.write(text)
        return
    try:
        output.write_text(text, encoding="utf-8")
    except OSError as exc:  # a folder that is not there, or not ours: said, not a traceback
        why = (exc.strerror or type(exc).__name__).lower()
        click.echo(f"error: cannot write {output}: {why}; nothing exported", err=True)
        sys.exit(1)
    click.echo(f"Exported {len(rows)} memories to {output}.", err=True)


@memory.command("import")
@click.argument("source", type=click.File("r", encoding="utf-8"))
@click.pass_context
def import_memories(ctx: click.Context, source: IO[str]) -> None:
    """Add the memories of a JSON-lines file (as `export` writes; "-" reads stdin). A memory
    that is already there (almost the same text, same scope) is updated, not doubled."""
    rows: list[Any] = []
    for number, line in enumerate(source, start=1):
        if not line.strip():
            continue
        try:
            rows.append(json.loads(line))
        except json.JSONDecodeError as exc:
            click.echo(f"line {number}: not JSON ({exc.msg}); nothing imported", err=True)
            sys.exit(1)
    try:
        added = _run(ctx, lambda store: store.import_rows(rows))
    except ValueError as exc:
        click.echo(f"{exc}; nothing imported", err=True)
        sys.exit(1)
    click.echo(f"Imported {added} new memories ({len(rows) - added} already there, updated).")
