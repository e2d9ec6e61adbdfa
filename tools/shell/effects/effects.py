"""Which files a command replaces, deletes, moves or creates, read from its words.

Under `supervised` replacing or deleting an existing file outside tmp/ and scratch/ asks the
owner, and any change to an identity file asks each time (tools/shell/plan.py decides; this
module only says what a command would do to which path). Programs are read by what they are
known to do: cp/mv/install by their target, rm and its kind by their operands, tee, sed -i,
dd of=, truncate, the outputs of sort -o and the like; archives by their members
(tools/shell/effects/archives.py), git by its command (tools/shell/effects/git_effects.py). A
program
nobody described may change any file it names: the safe guess. cp and mv are refused here
when they would make or move a link (cp -s, mv of a link, a copied folder's links).
"""

from __future__ import annotations

import os
from collections.abc import Callable, Iterator, Sequence
from pathlib import Path

from tools.paths import PolicyError
from tools.shell.effects.archives import tar_effects, unzip_effects
from tools.shell.effects.file_effects import Effect, Stdin, Verb, abs_path, is_dir
from tools.shell.program_rules import Parsed, ProgramCheck, parse_options

WALK_LIMIT = 20_000  # entries of a copied or moved folder looked at before giving up
_LONG = "--backup? --context? --suffix --target-directory -t -S --verbose. --no-target-directory."
_SPECS = {
    "cp": _LONG + " --archive. --attributes-only. --copy-contents. --debug. --dereference. "
    "--force. --interactive. --link. --no-clobber. --no-dereference. --one-file-system. "
    "--parents. --recursive. --remove-destination. --strip-trailing-slashes. --symbolic-link. "
    "--keep-directory-symlink. --preserve? --reflink? --update? --no-preserve --sparse",
    "mv": _LONG + " --exchange. --force. --interactive. --no-clobber. --no-copy. --update? "
    "--strip-trailing-slashes.",
    "install": _LONG + " --compare. --directory. --preserve-context. --preserve-timestamps. "
    "--strip. --debug. --group --mode --owner --strip-program -m -o -g",
    "rm": "--dir. --force. --interactive? --no-preserve-root. --one-file-system. "
    "--preserve-root? --recursive. --verbose.",
    "rmdir": "--ignore-fail-on-non-empty. --parents. --verbose.",
    "shred": "-n -s --iterations --size --random-source --exact. --force. --remove? --zero.",
    "unlink": "",
    "tee": "--append. --ignore-interrupts. --output-error?",
    "touch": "-r -d -t --reference --date --time --no-create. --no-dereference.",
    "mkdir": "-m --mode --context? --parents. --verbose.",
    "truncate": "-s -r --size --reference --io-blocks. --no-create.",
    "chmod": "--reference --changes. --silent. --quiet. --verbose. --recursive.",
    "chown": "--reference --from --changes. --silent. --quiet. --verbose. --recursive.",
}
_SPECS["chgrp"] = _SPECS["chown"]


def effects(
    name: str, program: str, args: Sequence[str], check: ProgramCheck, workspace: Path, stdin: Stdin
) -> list[Effect]:
    """What `program args` would do to the files it names (relative to the workspace)."""
    found = [Effect(out, "replaces", name) for out in check.outputs]
    handler = _HANDLERS.get(name)
    if handler is not None:
        return found + handler(name, args, workspace, stdin)
    if check.known and (check.outputs or not check.writes):
        return found
    own = program if "/" in program else ""
    return found + [Effect(p, "may change", name) for p in check.paths if p != own]


def _copy_move(name: str, args: Sequence[str], workspace: Path, stdin: Stdin) -> list[Effect]:
    parsed = parse_options(name, args, _SPECS[name])
    if name == "cp" and parsed.used("-s", "--symbolic-link", "-l", "--link"):
        raise PolicyError(
            "`cp -s` and `cp -l` make links, which are not made under supervised; copy the "
            "file itself (plain cp)"
        )
    if name == "install" and parsed.used("-d", "--directory"):
        return [Effect(op, "creates", name) for op in parsed.operands]
    sources, folder = list(parsed.operands), None
    targets = [value for option, value in parsed.options if option in ("-t", "--target-directory")]
    if targets:
        folder = targets[-1] or "."
    elif len(sources) < 2:
        return []  # an error for the program itself: nothing happens
    elif parsed.used("-T", "--no-target-directory") or not is_dir(workspace, sources[-1]):
        sources, dest = sources[:1], sources[-1]  # one source only (more is an error)
    else:
        folder = sources.pop()
    if name != "install":
        _check_links(name, parsed, sources, workspace)
    keep = parsed.used("-n", "--no-clobber") or ("--update", "none") in parsed.options
    recursive = name == "cp" and parsed.used(*_RECURSIVE)
    found: list[Effect] = []
    for source in sources:
        if folder is not None:
            dest = os.path.join(folder, os.path.basename(source.rstrip("/")) or ".")
        if name == "mv":
            found.append(Effect(source, "moves", name, tree=is_dir(workspace, source)))
        if recursive and is_dir(workspace, source):
            found += _copied(workspace, source, dest, "creates" if keep else "replaces")
        else:
            found.append(Effect(dest, "creates" if keep else "replaces", name))
    return found


_RECURSIVE = ("-r", "-R", "--recursive", "-a", "--archive")
_NO_DEREF = ("-P", "-d", "-a", "--no-dereference", "--archive")


def _check_links(name: str, parsed: Parsed, sources: list[str], workspace: Path) -> None:
    """Refuse a mv that would move a symbolic link, and a cp that would copy one as a link
    (-a, -P, -d, -r without -L), copy one leading out of the workspace (-L), or keep two
    copies hard-linked to each other (-a, -d, --preserve=links)."""
    follow = [o for o, _ in parsed.options if o in (*_NO_DEREF, "-L", "--dereference", "-H")]
    last = follow[-1] if follow else ""
    recursive = parsed.used(*_RECURSIVE)
    all_links = name == "cp" and last in ("-L", "--dereference")
    top = all_links or last == "-H" or (name == "cp" and not recursive and last not in _NO_DEREF)
    preserved = [v or "" for o, v in parsed.options if o == "--preserve"]
    dropped = [v or "" for o, v in parsed.options if o == "--no-preserve"]
    hard = parsed.used("-a", "--archive", "-d") or any(_links(v) for v in preserved)
    hard = name == "cp" and hard and not any(_links(v) for v in dropped)
    doing = "mv would move" if name == "mv" else "cp would copy"
    seen: dict[tuple[int, int], str] = {}
    for source in sources:
        root = abs_path(workspace, source)
        entries = [root]
        if os.path.isdir(root) and not os.path.islink(root) and (recursive or name == "mv"):
            entries += [path for path, _ in _walk(root, source)]
        for path in entries:
            shown = os.path.relpath(path, workspace)
            if os.path.islink(path):
                if not (all_links or (top and path == root)):
                    how = " as a link" if name == "cp" else ""
                    hint = " (add -L to copy what it points to)" if name == "cp" else ""
                    raise PolicyError(
                        f"{doing} the symbolic link {shown}{how}; links are not moved or made "
                        f"under supervised{hint}"
                    )
                real = Path(path).resolve()
                if real != workspace and workspace not in real.parents:
                    raise PolicyError(
                        f"{doing} what the link {shown} points to, outside the workspace"
                    )
            elif hard and os.path.isfile(path):
                info = os.stat(path)
                other = seen.setdefault((info.st_dev, info.st_ino), shown)
                if other != shown:
                    raise PolicyError(
                        f"cp would keep {other} and {shown} hard-linked to each other; copy "
                        "without -a, -d or --preserve=links"
                    )


def _links(preserve: str) -> bool:
    return any(attr in ("links", "all") for attr in preserve.split(","))


def _copied(workspace: Path, source: str, dest: str, verb: Verb) -> list[Effect]:
    """A folder copied into `dest`: each file it would write there."""
    found = [Effect(dest, "creates", "cp")]
    root = abs_path(workspace, source)
    for path, folder in _walk(root, source):
        target = os.path.join(dest, os.path.relpath(path, root))
        found.append(Effect(target, "creates" if folder else verb, "cp"))
    return found


def _walk(root: str, shown: str) -> Iterator[tuple[str, bool]]:
    """Every entry under `root`, links not followed: (path, is a folder); PolicyError past
    WALK_LIMIT entries (the folder is too large to check before it runs)."""
    count = 0
    for folder, dirs, files in os.walk(root):
        entries = [(d, True) for d in dirs] + [(f, False) for f in files]
        for entry, sub in entries:
            count += 1
            if count > WALK_LIMIT:
                raise PolicyError(f"{shown} is too large to check for links before it runs")
            path = os.path.join(folder, entry)
            yield path, sub and not os.path.islink(path)


def _operands(verb: Verb) -> Callable[[str, Sequence[str], Path, Stdin], list[Effect]]:
    def read(name: str, args: Sequence[str], workspace: Path, stdin: Stdin) -> list[Effect]:
        parsed = parse_options(name, args, _SPECS[name])
        tree = parsed.used("-r", "-R", "--recursive")  # rm, chmod, chown, chgrp
        how: Verb = "writes" if name == "tee" and parsed.used("-a", "--append") else verb
        return [Effect(op, how, name, tree and is_dir(workspace, op)) for op in parsed.operands]

    return read


def _dd(name: str, args: Sequence[str], workspace: Path, stdin: Stdin) -> list[Effect]:
    return [Effect(arg[3:], "replaces", name) for arg in args if arg.startswith("of=")]


def _sed(name: str, args: Sequence[str], workspace: Path, stdin: Stdin) -> list[Effect]:
    parsed = parse_options(name, args)
    if not parsed.used("-i", "--in-place"):
        return []
    files = parsed.operands
    if not parsed.used("-e", "--expression", "-f", "--file"):
        files = files[1:]  # the first operand is the script
    return [Effect(file, "replaces", name) for file in files]


def _find(name: str, args: Sequence[str], workspace: Path, stdin: Stdin) -> list[Effect]:
    if "-delete" not in args:
        return []
    words = list(args)
    while words and words[0] in ("-H", "-L", "-P"):
        words.pop(0)
    starts = []
    for word in words:
        if word.startswith(("-", "(", "!", ",")):
            break
        starts.append(word)
    return [Effect(start, "deletes", "find -delete", tree=True) for start in starts or ["."]]


def _zip(name: str, args: Sequence[str], workspace: Path, stdin: Stdin) -> list[Effect]:
    parsed = parse_options(name, args)
    if not parsed.operands:
        return []
    archive, *rest = parsed.operands
    found = [Effect(archive, "replaces", name)]
    if "." not in os.path.basename(archive):
        found.append(Effect(archive + ".zip", "replaces", name))  # zip adds the suffix
    if parsed.used("-m", "--move"):  # the files are deleted once stored
        found += [Effect(path, "deletes", name, is_dir(workspace, path)) for path in rest]
    return found


def _nothing(name: str, args: Sequence[str], workspace: Path, stdin: Stdin) -> list[Effect]:
    return []  # git's own effects: tools/shell/effects/git_effects.py


_HANDLERS: dict[str, Callable[[str, Sequence[str], Path, Stdin], list[Effect]]] = {
    "cp": _copy_move,
    "mv": _copy_move,
    "install": _copy_move,
    "tee": _operands("replaces"),
    "rm": _operands("deletes"),
    "rmdir": _operands("deletes"),
    "unlink": _operands("deletes"),
    "shred": _operands("deletes"),
    "touch": _operands("creates"),
    "mkdir": _operands("creates"),
    "truncate": _operands("replaces"),
    "chmod": _operands("writes"),
    "chown": _operands("writes"),
    "chgrp": _operands("writes"),
    "dd": _dd,
    "sed": _sed,
    "find": _find,
    "zip": _zip,
    "unzip": unzip_effects,
    "tar": tar_effects,
    "git": _nothing,
}
