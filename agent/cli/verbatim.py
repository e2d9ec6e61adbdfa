"""The CLI's one rule for rich: data is never markup.

Every rich Console a command makes comes from `console()`: markup, emoji codes and
highlighting off, so a string prints as it is. A chat key `telegram:100:` stays that (rich
would show `telegram💯`), a name holding `[bold]` or `[/]` keeps its brackets (rich would
eat them, or fail on a closing tag with nothing open), and a file name, model name, memory
or tool output is never recoloured. Style is given as `Text(..., style=...)` or a column's
style, never as markup inside a string. rich is imported only when a console is made.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from rich.console import Console


def console(**options: Any) -> Console:
    """A rich Console that prints strings verbatim; `options`: rich's others (stderr...)."""
    from rich.console import Console

    return Console(markup=False, emoji=False, highlight=False, **options)
