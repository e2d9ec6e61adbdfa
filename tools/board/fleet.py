"""Several boards by name: what a runtime holds, closes and waits for.

The names of their pins are tools/board/pin_names.py's; a board that is down answers for
itself (tools/board/board_tools.py) while the others keep working.
"""

from __future__ import annotations

import asyncio
from collections.abc import Iterator, Mapping

from tools.board.board import Board
from tools.board.pin_names import PinNames


class Boards:
    """Every configured board of a runtime, by name; what the daemon holds and closes."""

    def __init__(self, boards: Mapping[str, Board]) -> None:
        if not boards:
            raise ValueError("no boards")
        self.boards = dict(boards)
        self.names = PinNames({name: board.settings for name, board in boards.items()})

    @classmethod
    def single(cls, board: Board) -> Boards:
        return cls({board.name: board})

    def __getitem__(self, name: str) -> Board:
        return self.boards[name]

    def __iter__(self) -> Iterator[Board]:
        return iter(self.boards.values())

    def __len__(self) -> int:
        return len(self.boards)

    def chosen(self, board: str | None) -> list[Board]:
        """The board `board` names, or every board when it is not given."""
        name = self.names.board_named(board)
        return [self.boards[name]] if name is not None else list(self.boards.values())

    @property
    def pattern_grace_s(self) -> float:
        return max(board.pattern_grace_s for board in self)

    @property
    def finite_patterns(self) -> list[str]:
        """Pins whose pattern has an end, which `close()` waits for ("13", "garage 13")."""
        several = len(self) > 1
        return [
            f"{board.name} {pin}" if several else str(pin)
            for board in self
            for pin in board.finite_patterns
        ]

    async def close(self, *, grace_s: float | None = None) -> None:
        await asyncio.gather(*(board.close(grace_s=grace_s) for board in self))
