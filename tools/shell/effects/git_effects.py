"""What a git command would do to the work tree, read before it runs.

Under `supervised` git runs with core.symlinks=false (tools/shell/links.py), so no checkout
makes a link; what remains is that many commands rewrite or delete tracked files: apply, am,
checkout, switch, restore, reset --hard, merge, pull, cherry-pick, revert, rebase, stash,
clean, rm, mv, read-tree -u, bisect. Which files is known for a patch (read here, from its
file, a here-document or `< file`) and for the paths `git restore`, `git rm` and `git mv`
name; otherwise the whole work tree may change, and it is named as such.
"""

from __future__ import annotations

import os
from collections.abc import Sequence
from pathlib import Path

from tools.paths import PolicyError
from tools.shell.effects.file_effects import Effect, Stdin, open_regular
from tools.shell.program_rules import parse_git, parse_options

MAX_PATCH_BYTES = 8 * 1024 * 1024
_APPLY = (
    "-p -C --directory --exclude --include --whitespace --build-fake-ancestor -3. --3way. "
    "--check. --stat. --numstat. --summary. --apply. --cached. --index. --reverse. -R. "
    "--unsafe-paths. --reject. --recount. --allow-empty. --verbose. --quiet. --no-add. "
    "--unidiff-zero. --inaccurate-eof. --intent-to-add. -N. -z."
)
_SPECS = {
    "checkout": "-b -B --orphan --conflict --pathspec-from-file",
    "switch": "-c -C --create --force-create --orphan --conflict",
    "restore": "-s --source --pathspec-from-file --staged. --worktree. -S. -W.",
    "rm": "--pathspec-from-file --cached. -r. --dry-run. -n.",
    "mv": "--dry-run. -n.",
    "clean": "-e --exclude --dry-run. -n.",
    "clone": "-o -b -u -c --origin --branch --depth --reference --separate-git-dir --filter "
    "--template --config --upload-pack --jobs -j --shallow-since --shallow-exclude",
    "worktree": "-b -B --reason --orphan",
}
# The whole work tree may change: always, or unless the first operand is one of these.
_WHOLE = frozenset({"am", "merge", "pull", "cherry-pick", "revert", "rebase", "checkout-index"})
_WHOLE_UNLESS = {
    "stash": ("list", "show", "create", "store"),
    "bisect": ("", "log", "view", "visualize", "help"),
    "sparse-checkout": ("", "list"),
    "submodule": ("", "status", "summary"),
}


def git_effects(args: Sequence[str], workspace: Path, stdin: Stdin) -> list[Effect]:
    """The work-tree paths `git args` would replace, delete or create."""
    head, command, rest = parse_git(args)
    by = f"git {command}"
    cwd = "."
    for option, value in head:
        cwd = os.path.join(cwd, value or ".") if option == "-C" else cwd
    trees = [value for option, value in head if option == "--work-tree" and value]
    root = os.path.join(cwd, trees[-1]) if trees else _top(workspace, cwd)
    parsed = parse_options(by, rest, _SPECS.get(command, ""))
    first = parsed.operands[0] if parsed.operands else ""
    whole = [Effect(root, "may change", by, tree=True)]
    if command in _WHOLE or command in _WHOLE_UNLESS:
        return [] if first in _WHOLE_UNLESS.get(command, ()) else whole
    if command == "apply":
        return _apply(rest, cwd, root, workspace, stdin)
    if command in ("checkout", "switch"):
        changes = parsed.operands or parsed.used("--orphan")
        if "--" in rest:
            return _paths(parsed.operands, cwd, by) or whole
        return whole if changes else []
    if command == "restore":
        if parsed.used("-S", "--staged") and not parsed.used("-W", "--worktree"):
            return []
        return _paths(parsed.operands, cwd, by) or whole
    if command == "reset":
        return whole if parsed.used("--hard", "--merge", "--keep") else []
    if command == "read-tree":
        return whole if parsed.used("-u") else []
    if command == "clean":
        deletes = Effect(root, "deletes", by, tree=True)
        return [] if parsed.used("-n", "--dry-run") else [deletes]
    if command == "rm" and not parsed.used("--cached", "-n", "--dry-run"):
        named = _paths(parsed.operands, cwd, by)
        return [Effect(e.raw, "deletes", by, tree=True) for e in named] or whole
    if command == "mv" and len(parsed.operands) > 1 and not parsed.used("-n", "--dry-run"):
        *sources, dest = parsed.operands
        moved = [Effect(os.path.join(cwd, p), "moves", by, tree=True) for p in sources]
        return [*moved, Effect(os.path.join(cwd, dest), "may change", by, tree=True)]
    if command == "clone" and parsed.operands:
        name = os.path.basename(first.rstrip("/")).removesuffix(".git")
        target = parsed.operands[1] if len(parsed.operands) > 1 else name
        return [Effect(os.path.join(cwd, target), "creates", by, tree=True)]
    if command in ("init", "worktree") and parsed.operands:
        made = parsed.operands[1:2] if command == "worktree" and first == "add" else []
        made = parsed.operands[:1] if command == "init" else made
        return [Effect(os.path.join(cwd, p), "creates", by, tree=True) for p in made]
    return []


def _top(workspace: Path, cwd: str) -> str:
    """The work tree holding `cwd`: the nearest folder at or above it, within the
    workspace, that has a .git; `cwd` itself when there is none (git apply's case)."""
    start = Path(os.path.normpath(os.path.join(workspace, cwd)))
    folder = start
    while folder == workspace or workspace in folder.parents:
        if os.path.lexists(folder / ".git"):
            return str(folder)
        folder = folder.parent
    return str(start)


def _paths(operands: list[str], cwd: str, by: str) -> list[Effect]:
    """Paths named plainly (a pathspec with magic or a pattern: the caller's whole tree)."""
    if any(p.startswith(":") or any(c in p for c in "*?[") for p in operands):
        return []
    return [Effect(os.path.join(cwd, p), "may change", by, tree=True) for p in operands]


def _apply(args: Sequence[str], cwd: str, root: str, workspace: Path, stdin: Stdin) -> list[Effect]:
    """The files a patch names, or the whole tree when the patch cannot be read first."""
    parsed = parse_options("git apply", args, _APPLY)
    if parsed.used("--unsafe-paths"):
        raise PolicyError("`git apply --unsafe-paths` writes outside the work tree; refused")
    if parsed.used("--check", "--stat", "--numstat", "--summary") and not parsed.used("--apply"):
        return []
    if parsed.used("--cached") and not parsed.used("--index"):
        return []  # the index only
    whole = [Effect(root, "may change", "git apply", tree=True)]
    texts = []
    for patch in parsed.operands or ["-"]:
        text = stdin.text if patch == "-" else None
        source = stdin.path if patch == "-" else os.path.join(cwd, patch)
        if text is None and source is not None:
            text = _read(os.path.join(workspace, source))
        if text is None:
            return whole
        texts.append(text)
    strips = [value or "" for option, value in parsed.options if option == "-p"]
    strip = int(strips[-1]) if strips and strips[-1].isdigit() else 1
    prefix = next((v for o, v in reversed(parsed.options) if o == "--directory" and v), "")
    names = [name for text in texts for name in patch_paths(text, strip)]
    return [Effect(os.path.join(root, prefix, name), "may change", "git apply") for name in names]


def _read(path: str) -> str | None:
    try:
        with open_regular(path) as handle:
            data = handle.read(MAX_PATCH_BYTES + 1)
    except OSError:
        return None
    return None if len(data) > MAX_PATCH_BYTES else data.decode("utf-8", errors="replace")


def patch_paths(text: str, strip: int = 1) -> list[str]:
    """Every path a unified or git diff touches: old and new names of each file, renames
    and copies, with `strip` leading components dropped as `-p` does."""
    found: list[str] = []
    for line in text.splitlines():
        name = ""
        if line.startswith(("--- ", "+++ ")):
            name = _strip(_unquote(line[4:].split("\t")[0].strip()), strip)
        elif line.startswith(("rename from ", "rename to ", "copy from ", "copy to ")):
            name = _unquote(line.split(" ", 2)[2].strip())
        elif line.startswith("diff --git "):
            found += [_strip(n, strip) for n in _git_names(line[len("diff --git ") :])]
        if name and name != "/dev/null":
            found.append(name)
    return [name for name in dict.fromkeys(found) if name and name != "/dev/null"]


def _git_names(rest: str) -> list[str]:
    """`a/x b/x` (names may hold spaces: the split where both sides name the same file)."""
    if rest.startswith('"'):
        return []  # quoted names: the ---/+++ lines carry them too
    for at in (i for i, c in enumerate(rest) if c == " "):
        old, new = rest[:at], rest[at + 1 :]
        if old.split("/", 1)[-1] == new.split("/", 1)[-1]:
            return [old, new]
    return rest.split(" ")[:2]


def _strip(name: str, strip: int) -> str:
    if name == "/dev/null":
        return name
    parts = name.split("/")
    return "/".join(parts[strip:]) if len(parts) > strip else ""


def _unquote(name: str) -> str:
    """Git quotes names with unusual bytes in C style; the quotes and escapes are dropped
    (an escaped byte stays as its escape: enough to see an identity file's name)."""
    if len(name) > 1 and name[0] == name[-1] == '"':
        return name[1:-1].replace('\\"', '"').replace("\\\\", "\\")
    return name
