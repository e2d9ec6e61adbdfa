"""Sed scripts read command by command: which ones may run a program or touch a file.

`sed -i` and plain sed are allowed programs; what a script does is only known by reading it
the way GNU sed does, so this reader accepts the commands it knows to be harmless and names
the first one it does not (e, r, R, w, W, s///e, s///w, or anything it cannot follow)."""

from __future__ import annotations

import re

_SED_ADDRESS = re.compile(r"(\d+(~\d+)?|\$|/(\\.|[^\\/\n])*/[IM]*|\\(.)(\\.|.)*?\4[IM]*)")
_SED_SECOND = re.compile(_SED_ADDRESS.pattern + r"|[+~]\d+")
_SED_PARTS = re.compile(r"([^\\\n])((?:\\.|(?!\1).)*\1){2}", re.DOTALL)  # /one/two/


def sed_script_refusal(script: str) -> str | None:
    """Why a sed script may run a program or touch a file (e, r, R, w, W, s///e, s///w),
    or None when every command in it is one this reader knows to be harmless."""
    i = 0
    while i < len(script):
        if script[i] in " \t\n;}" or script[i] == "#":
            i = _line_end(script, i) if script[i] == "#" else i + 1
            continue
        address = _SED_ADDRESS.match(script, i)
        if address and script[address.end() : address.end() + 1] == ",":
            address = _SED_SECOND.match(script, address.end() + 1)
            if not address:
                return "an address this check cannot read"
        i = len(script) - len(script[address.end() if address else i :].lstrip(" \t!"))
        command, i = script[i : i + 1] or "end", i + 1
        if command in "{=dDgGhHlnNpPxzFqQL":
            i = len(script) - len(script[i:].lstrip(" \t0123456789"))
        elif command in "aic":
            i = _line_end(script, i)
        elif command in "btT:v":  # a label runs to ; or the end of the line
            i = min(
                [p for p in (script.find(";", i), script.find("\n", i)) if p >= 0] or [len(script)]
            )
        elif command in "sy":
            i = parts.end() if (parts := _SED_PARTS.match(script, i)) else -1
            flags = re.compile(r"[gpiImM\d]*").match(script, max(i, 0)) if command == "s" else None
            i = flags.end() if flags and i >= 0 else i
            if i < 0 or (command == "s" and script[i : i + 1] in ("e", "w")):
                return f"an unterminated {command} command, or the s///e or s///w flag"
        elif command in "ewWrR":
            return f"the {command} command runs a command or reads or writes a file"
        else:
            return f"the command {command!r} is not one this check knows"
    return None


def _line_end(script: str, i: int) -> int:
    """The end of a line, past backslash-newline continuations (for a, i and c text)."""
    while (end := script.find("\n", i)) > 0 and script[end - 1] == "\\":
        i = end + 1
    return len(script) if end < 0 else end
