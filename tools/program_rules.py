"""What each program can do with its arguments: which name paths, which write, which run
other programs. The shell plan confines every path found here to the workspace, refuses
writers under read_only, and refuses the options listed as escapes outright.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass

# Programs whose job is to run another program (or a script): nothing they run is checked.
WRAPPERS = frozenset({
    "env", "xargs", "nice", "nohup", "timeout", "sudo", "doas", "su", "stdbuf", "time",
    "watch", "chroot", "setsid", "flock", "ionice", "taskset", "unshare", "nsenter", "strace",
    "sh", "bash", "dash", "zsh", "ksh", "fish", "csh", "tcsh", "busybox", "exec", "eval",
    "command", "builtin", "source", ".", "python", "python3", "perl", "ruby", "node", "php",
    "lua", "awk", "gawk", "mawk", "nawk", "expect", "script", "parallel", "make", "less",
    "more", "vi", "vim", "nvim", "emacs", "nano", "ed", "man", "ssh", "scp", "rsync",
})  # fmt: skip

# Programs that change files whatever their options.
WRITERS = frozenset({
    "mkdir", "touch", "cp", "mv", "rm", "rmdir", "ln", "tee", "chmod", "chown", "chgrp",
    "truncate", "shred", "unlink", "install", "dd", "split", "csplit", "patch", "gzip",
    "gunzip", "bzip2", "xz", "unxz", "zip", "unzip",
})  # fmt: skip

# Programs whose words are text, not paths.
NO_PATHS = frozenset({"echo", "printf", "pwd", "true", "false", "yes", "seq", "basename",
                      "dirname", "expr", "test", "[", "sleep", "whoami", "id", "uname", "hostname",
                      "nproc", "df"})  # fmt: skip

# Read-only git subcommands; any other (a built-in that writes, or an alias) is checked below.
GIT_READERS = frozenset({
    "status", "log", "diff", "show", "ls-files", "grep", "blame", "rev-parse", "describe",
    "shortlog", "cat-file", "ls-tree", "rev-list", "reflog", "whatchanged", "help", "version",
})  # fmt: skip
GIT_WRITERS = frozenset({
    "init", "add", "commit", "checkout", "switch", "restore", "reset", "rm", "mv", "stash",
    "merge", "rebase", "cherry-pick", "revert", "tag", "branch", "clean", "apply", "am",
    "clone", "fetch", "pull", "push", "notes", "worktree", "gc", "prune",
})  # fmt: skip
_GIT_ESCAPES = {
    "-c": "git -c can set any configuration, including aliases and hooks that run programs",
    "--config-env": "git --config-env can set configuration that runs programs",
    "--exec-path": "git --exec-path chooses which programs git runs",
    "--upload-pack": "git --upload-pack runs a program",
    "--receive-pack": "git --receive-pack runs a program",
    "-u": "git -u (upload-pack) runs a program",
    "--ext-diff": "git --ext-diff runs an external diff program",
    "--output": "git --output writes a file of its choosing",
    "--template": "git --template copies hooks that run programs",
}
_GIT_REFUSED = frozenset({"config", "difftool", "mergetool", "filter-branch", "submodule",
                          "bisect", "daemon", "instaweb", "web--browse", "credential",
                          "archimport", "cvsimport", "svn", "send-email", "hook"})  # fmt: skip

# option -> (refusal, or None when its value is a path; writes)
_OPTIONS: dict[str, dict[str, tuple[str | None, bool]]] = {
    "sort": {"--compress-program": ("sort --compress-program runs a program", False),
             "-o": (None, True), "--output": (None, True), "-T": (None, False),
             "--temporary-directory": (None, False), "--files0-from": (None, False)},
    "date": {"-f": (None, False), "--file": (None, False), "-r": (None, False),
             "--reference": (None, False), "-s": ("date -s sets the clock", False),
             "--set": ("date --set sets the clock", False)},
    "cp": {"-t": (None, True), "--target-directory": (None, True)},
    "mv": {"-t": (None, True), "--target-directory": (None, True)},
    "ln": {"-t": (None, True), "--target-directory": (None, True)},
    "grep": {"-f": (None, False), "--file": (None, False), "--exclude-from": (None, False)},
    "diff": {"--from-file": (None, False), "--to-file": (None, False), "-X": (None, False),
             "--exclude-from": (None, False)},
    "touch": {"-r": (None, True), "--reference": (None, True)},
    "du": {"--files0-from": (None, False), "-X": (None, False), "--exclude-from": (None, False)},
    "wc": {"--files0-from": (None, False)},
    "tar": {"--to-command": ("tar --to-command runs a program", False),
            "--use-compress-program": ("tar --use-compress-program runs a program", False),
            "-I": ("tar -I runs a program", False),
            "--checkpoint-action": ("tar --checkpoint-action runs a program", False),
            "--rsh-command": ("tar --rsh-command runs a program", False),
            "--info-script": ("tar --info-script runs a program", False),
            "-F": ("tar -F runs a program", False),
            "--new-volume-script": ("tar --new-volume-script runs a program", False),
            "-f": (None, False), "--file": (None, False), "-C": (None, False),
            "--directory": (None, False), "-T": (None, False), "--files-from": (None, False)},
    "rg": {"--pre": ("rg --pre runs a program on every file", False), "-f": (None, False),
           "--file": (None, False), "--ignore-file": (None, False)},
    "find": {},
}  # fmt: skip
# Short options of these programs that take their value in the next word (or attached).
_SHORT_WITH_VALUE = {
    "sort": "oTkt", "date": "frsd", "cp": "tS", "mv": "tS", "ln": "tS", "grep": "efmABCd",
    "diff": "XIFLx", "touch": "rdt", "du": "XBdt", "tar": "fCITFIbHKNg", "head": "nc",
    "tail": "ncs", "rg": "fegtmABCjMrT", "cut": "bcdf", "uniq": "fsw", "wc": "", "ls": "ITw",
    "git": "C", "mkdir": "m", "chmod": "", "tee": "", "sed": "ef", "find": "",
}  # fmt: skip
_FIND_REFUSED = {
    "-exec": "find -exec runs a program", "-execdir": "find -execdir runs a program",
    "-ok": "find -ok runs a program", "-okdir": "find -okdir runs a program",
    "-delete": "find -delete deletes; use rm on the files found, which asks first",
    "-fprint": "find -fprint writes a file", "-fprint0": "find -fprint0 writes a file",
    "-fprintf": "find -fprintf writes a file", "-fls": "find -fls writes a file",
}  # fmt: skip
# The sed commands allowed: an optional address, then s/// with harmless flags, or p d q =.
_SED_ADDRESS = r"(?:\d+|\$|/[^/]*/)(?:,(?:\d+|\$|/[^/]*/))?!?"
_SED_SAFE = re.compile(
    rf"(?:{_SED_ADDRESS})?\s*(?:s(?P<d>[^\\\n\w\s])(?:(?!(?P=d)).|\\.)*(?P=d)"
    rf"(?:(?!(?P=d)).|\\.)*(?P=d)[gpI0-9]*|[pdq=])"
)


@dataclass(frozen=True)
class ProgramCheck:
    paths: tuple[str, ...]  # words and option values that name files, to confine
    writes: bool  # the invocation changes files
    refusal: str | None = None  # set when it would run another program or write elsewhere


def check_program(program: str, args: Sequence[str]) -> ProgramCheck:
    if program in WRAPPERS:
        return ProgramCheck((), False, f"{program} runs other programs, which cannot be checked")
    if program == "git":
        return _git(args)
    if program == "find":
        return _find(args)
    if program == "sed":
        return _sed(args)
    if program in NO_PATHS:
        return ProgramCheck((), False)
    check = _generic(program, args)
    if program in ("grep", "egrep", "fgrep", "rg") and not _has_pattern_option(args):
        check = ProgramCheck(check.paths[1:], check.writes, check.refusal)  # the pattern
    if program == "tar" and any(_tar_mode(a) in "cxru" for a in args[:1] if _tar_mode(a)):
        check = ProgramCheck(check.paths, True, check.refusal)
    return check


def _has_pattern_option(args: Sequence[str]) -> bool:
    return any(a in ("-e", "-f", "--regexp", "--file") or a.startswith(("-e", "--regexp="))
               for a in args)  # fmt: skip


def _tar_mode(first: str) -> str:
    """The operation letter of tar's first word (-xf, xf, --extract), or ""."""
    long = {"--create": "c", "--extract": "x", "--append": "r", "--update": "u", "--list": "t"}
    if first in long:
        return long[first]
    letters = first.lstrip("-")
    return next((c for c in letters if c in "cxrut"), "")


def _generic(program: str, args: Sequence[str]) -> ProgramCheck:
    """Options of the program's table are checked; every other word that is not an option
    is a path, and so is the value of an option that takes one."""
    options = _OPTIONS.get(program, {})
    with_value = _SHORT_WITH_VALUE.get(program, "")
    paths: list[str] = []
    writes = program in WRITERS
    words = iter(args)
    only_operands = False
    for word in words:
        if only_operands or word == "-" or not word.startswith("-"):
            paths.append(word)
            continue
        if word == "--":
            only_operands = True
            continue
        name, has_value, value = word.partition("=")
        if name.startswith("--"):
            rule = options.get(name)
            if rule is not None:
                refusal, writer = rule
                if refusal:
                    return ProgramCheck((), writes, refusal)
                writes = writes or writer
                paths.append(value if has_value else next(words, ""))
            elif has_value:
                paths.append(value)  # --anything=value: a value that could be a path
            continue
        for index, letter in enumerate(word[1:], start=1):  # -abc, -ofile, -o file
            rule = options.get(f"-{letter}")
            if rule is not None and rule[0]:
                return ProgramCheck((), writes, rule[0])
            writes = writes or bool(rule and rule[1])
            if letter in with_value or rule is not None:
                attached = word[index + 1 :]
                paths.append(attached if attached else next(words, ""))
                break
    return ProgramCheck(tuple(p for p in paths if p), writes)


def _git(args: Sequence[str]) -> ProgramCheck:
    paths: list[str] = []
    words = list(args)
    while words and words[0].startswith("-"):
        option = words.pop(0)
        name = option.partition("=")[0]
        if name in _GIT_ESCAPES:
            return ProgramCheck((), False, _GIT_ESCAPES[name])
        if name in ("-C", "--git-dir", "--work-tree"):
            value = option.partition("=")[2] or (words.pop(0) if words else "")
            paths.append(value)
    if not words:
        return ProgramCheck(tuple(paths), False)
    command, rest = words[0], words[1:]
    if command in _GIT_REFUSED:
        return ProgramCheck((), False, f"git {command} can run programs or change git's setup")
    if command not in GIT_READERS | GIT_WRITERS:
        return ProgramCheck(
            (), False, f"git {command} is not a git command pinclaw knows (it may be an alias)"
        )
    for word in rest:
        name = word.partition("=")[0]
        if name in _GIT_ESCAPES:
            return ProgramCheck((), False, _GIT_ESCAPES[name])
        if name in ("--exec", "-x", "--upload-pack", "--receive-pack"):
            return ProgramCheck((), False, f"git {command} {name} runs a program")
        if not word.startswith("-") or name in ("--output",):
            paths.append(word.partition("=")[2] if "=" in word and word.startswith("-") else word)
    return ProgramCheck(tuple(paths), command in GIT_WRITERS)


def _find(args: Sequence[str]) -> ProgramCheck:
    """Starting points come first, then the expression: its file-reading tests are paths,
    its actions that run programs, delete or write files are refused."""
    words = list(args)
    start = 0
    while start < len(words) and not words[start].startswith(("-", "(", "!")):
        start += 1
    paths = words[:start]
    expression = iter(words[start:])
    for word in expression:
        if word in _FIND_REFUSED:
            return ProgramCheck((), False, _FIND_REFUSED[word])
        if word in ("-newer", "-anewer", "-cnewer", "-samefile", "-files0-from"):
            paths.append(next(expression, ""))
    return ProgramCheck(tuple(p for p in paths if p), False)


def _sed(args: Sequence[str]) -> ProgramCheck:
    """Scripts are refused when they could run a program or touch another file (the e, w,
    W, r, R commands and the e/w flags of s): a conservative reading, not a sed parser."""
    scripts: list[str] = []
    files: list[str] = []
    writes = False
    words = iter(args)
    for word in words:
        if word in ("-e", "--expression"):
            scripts.append(next(words, ""))
        elif word in ("-f", "--file"):
            return ProgramCheck((), False, "sed -f reads a script file pinclaw cannot check")
        elif word.startswith("-i") or word.startswith("--in-place"):
            writes = True
        elif word.startswith("-") and word != "-":
            continue
        elif not scripts:
            scripts.append(word)
        else:
            files.append(word)
    for script in scripts:
        for command in filter(None, (part.strip() for part in script.split(";"))):
            if not _SED_SAFE.fullmatch(command):
                return ProgramCheck(
                    (),
                    writes,
                    f"sed command {command!r} is refused: only s/// (flags g, p, I, "
                    "a number), p, d, q and = with line addresses are allowed, since others can "
                    "run programs or read and write other files",
                )
    return ProgramCheck(tuple(files), writes)
