"""What an allowed program does with its arguments: which name paths, whether it writes,
and which options would run another program or reach past the checks.

The shell tool confines every path found here to the workspace, refuses writes under
read_only autonomy, and refuses a check that has a refusal. When unsure a word counts as a
path (a false refusal costs a message, a missed path is an escape): an unknown option's
value, the rest of a short-option cluster after an unknown letter, a key=value's value."""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass, field
from urllib.parse import unquote, urlsplit

from tools.shell.sed_rules import sed_script_refusal as sed_script_refusal  # checked by _sed


@dataclass(frozen=True)
class ProgramCheck:
    paths: tuple[str, ...]  # every word that may name a file: the caller confines each
    writes: bool  # the invocation changes files (refused under read_only autonomy)
    refusal: str | None = None  # why the invocation is refused, and what to do instead
    outputs: tuple[str, ...] = ()  # paths named as its output (sort -o x): replaced
    known: bool = True  # its rule, or the lists below, say what it writes; False: a guess


def _words(text: str) -> frozenset[str]:
    return frozenset(text.split())


WRAPPERS = _words(
    "env xargs nice nohup timeout sudo doas su runuser stdbuf time watch chroot setsid flock "
    "ionice taskset unshare nsenter strace ltrace gdb script parallel exec eval command builtin "
    ". source trap sh bash dash zsh ksh mksh fish csh tcsh python python3 python2 pypy pypy3 "
    "perl ruby node nodejs deno bun php lua tclsh awk gawk mawk nawk busybox toybox make "
    "npm npx yarn pnpm pip pip3 uv uvx cargo go ssh scp sftp rsync docker podman expect "
    "tmux screen crontab at batch systemd-run dbus-launch xdg-open open sqlite3 mysql psql dc "
    "chrt numactl setpriv pkexec runcon sg newgrp bwrap firejail"
)
# Programs with no rule below that only read the files they name (the others may write).
READERS = _words(
    "cat head tail wc ls grep egrep fgrep diff cmp comm du df stat cut paste nl od hexdump xxd "
    "strings md5sum sha1sum sha256sum sha512sum b2sum cksum sum readlink realpath tac rev fold "
    "fmt expand unexpand column join look tree zcat bzcat xzcat zgrep jq id whoami uname "
    "hostname printenv which nproc free ps uptime locale test [ yes numfmt factor shuf"
)
_VERSIONED = re.compile(r"(python|pypy|perl|ruby|node|php|lua|tclsh)[\d.]*")
_INTERACTIVE = _words("less more most man vi vim nvim view ex ed nano pico emacs")
_WRITERS = _words(
    "rm rmdir ln chmod chown chgrp truncate shred install dd mkfifo mknod link unlink split "
    "csplit patch rename mktemp sponge mkdir touch cp mv tee"
)
_WHY = {  # why an option marked `!reason` below is refused
    "": "it can run another program",
    "clock": "it sets the system clock",
    "script": "a script file cannot be checked; give the script with -e",
    "abs": "it writes outside the target directory",
    "out": "it writes to a file; redirect the output with > instead",
    "hooks": "a template can install hooks, which run programs",
    "config": "git config may only read settings here (git config --get name)",
}
# A rule a line (indented lines go on): programs, options, flags. `-k` takes a value, `-k.`
# none, `-k?` an attached one only; then `:path`/`:out` (the value is a path read/written),
# `:w` (it writes) or `!why` (refused). Programs with no rule: every word may be a path.
# Operands are paths unless @none, @pattern (the first is one unless -e/-f gave it) or @date
# (+FORMAT). @listing: -c/-l/-t... only read. git:NAME is a git command: @reads=a,b: it only
# reads with these first operands ("": none); @runs.
_RULES = """
grep -e -f:path -m -A -B -C -d -D --regexp --file:path --max-count --after-context --label
  --before-context --context --include --exclude --exclude-from:path --exclude-dir @pattern
rg -e -f:path -g -t -T -m -A -B -C -d -M -r -E -j --regexp --file:path --ignore-file:path
  --glob --iglob --type --type-not --type-add --max-count --max-depth --max-columns --replace
  --encoding --threads --sort --sortr --pre! --pre-glob --hostname-bin! --files. @pattern
echo,printf,pwd,dirname,tr,true,false,sleep,basename,seq -s -f --suffix --format @none
date -d -f:path -r:path -s!clock -I? --date --file:path --reference:path --set!clock @date
sort -k -t -S -T:path -o:out --key --field-separator --buffer-size --output:out --batch-size
  --temporary-directory:path --files0-from:path --random-source:path --compress-program!
sdiff,diff3 --diff-program!
uniq -f -s -w --skip-fields --skip-chars --check-chars
file -m:path -f:path -F -P -e -C.:w --magic-file:path --files-from:path --compile.:w
zip -b:path -O:out -i -x -n -P -Z --temp-path:path --output-file:out --unzip-command! @writes
unzip -d:path -x -P @writes @listing
gzip,gunzip,bzip2,bunzip2,xz,unxz,lzma,unlzma,zstd,unzstd -S --suffix -b @writes @listing
sed -e -l -f!script -i?:w --expression --line-length --file!script --in-place?:w
tar -f:path -C:path -T:path -X:path -g:out -N:path -b -H -K -L -V -c.:w -x.:w -r.:w -u.:w
  -A.:w -I! -F! -P.!abs --file:path --directory:path --files-from:path --exclude-from:path
  --listed-incremental:out --index-file:out --volno-file:out --newer:path --after-date:path
  --create.:w --extract.:w --get.:w --append.:w --update.:w --concatenate.:w --catenate.:w
  --delete.:w --use-compress-program! --to-command! --checkpoint-action! --rsh-command!
  --rmt-command! --info-script! --new-volume-script! --absolute-names.!abs --exclude
  --transform --xform --strip-components --owner --group --mode --format --label
git -C:path -c! --config-env! --exec-path?! --git-dir:path --work-tree:path --namespace
git:status,log,diff,show,ls-files,ls-tree,blame,annotate,rev-parse,describe,shortlog,cat-file,
  rev-list,diff-tree,diff-index,diff-files,whatchanged,count-objects,for-each-ref,show-ref,
  name-rev,merge-base,cherry,var,check-ignore,check-attr,version,range-diff,fsck,show-branch
git:add,rm,mv,checkout,switch,restore,reset,revert,cherry-pick,am,apply,clean,gc,prune,
  update-index,update-ref,symbolic-ref,write-tree,commit-tree,read-tree,checkout-index,mktag,
  mktree,hash-object,bundle,repack,pack-refs,replace @writes
git:commit -m -F:path -t:path --message --file:path --template:path @writes
git:merge -m -F:path --message --file:path @writes
git:notes -m -F:path --message --file:path @reads=,list,show
git:tag -m -F:path --message --file:path --contains --no-contains --merged --no-merged
  --points-at --sort --format
git:stash -m --message @reads=list,show
git:clone -u! -c! --upload-pack! --config! --template!hooks --separate-git-dir:path
  --reference:path @writes
git:init --template!hooks --separate-git-dir:path @writes
git:fetch,pull --upload-pack! @writes
git:ls-remote --upload-pack!
git:push --receive-pack! --exec! @writes
git:grep -O?! -e -f:path --open-files-in-pager?! --regexp --file:path @pattern
git:archive -o:out --output:out --exec! --remote! @writes
git:rebase -x! --exec! @writes
git:format-patch -o:out --output-directory:out @writes
git:config -f:path --file:path --add!config --unset!config --unset-all!config -e!config
  --replace-all!config --edit!config --rename-section!config --remove-section!config
git:branch --edit-description! --contains --no-contains --merged --no-merged --sort --format
git:remote @reads=,show,get-url
git:reflog @reads=,show
git:worktree,sparse-checkout @reads=list
git:submodule @reads=,status,summary
git:bisect @reads=log
git:difftool,mergetool,filter-branch,help @runs
"""


_Rule = tuple[str, frozenset[str]]  # options, flags
_SPECS: dict[str, _Rule] = {}
for _line in re.sub(r"\n\s+", " ", re.sub(r",\n\s+", ",", _RULES)).strip().splitlines():
    _names, _, _rest = _line.partition(" ")
    _options = " ".join(w for w in _rest.split() if w[0] != "@")
    _flags = frozenset(w[1:] for w in _rest.split() if w[0] == "@")
    _prefix = "git:" if _names.startswith("git:") else ""  # git:a,b: git:a and git:b
    _SPECS |= {_prefix + n.removeprefix("git:"): (_options, _flags) for n in _names.split(",")}


@dataclass(frozen=True)
class _Opt:
    value: str  # "required", "optional" (attached only) or "none"
    kind: str  # "text", "path", "out" (a path written), "w" (it writes), "refused"
    why: str = ""


_TOKEN = re.compile(r"(--?[\w-]+)([.?]?)(:path|:out|:w|!\w*)?")


def _table(spec: str) -> dict[str, _Opt]:
    table = {}
    for token in spec.split():
        name, arity, tag = _TOKEN.fullmatch(token).groups()  # type: ignore[union-attr]
        value = {"": "required", ".": "none", "?": "optional"}[arity]
        kind = "refused" if tag and tag[0] == "!" else (tag or ":text")[1:]
        why = _WHY[tag[1:]] if kind == "refused" and tag else ""
        table[name] = _Opt("none" if kind == "w" and not arity else value, kind, why)
    return table


@dataclass
class Parsed:
    """An invocation as its rule reads it: options in order with their values, operands."""

    options: list[tuple[str, str | None]] = field(default_factory=list)
    operands: list[str] = field(default_factory=list)
    paths: list[str] = field(default_factory=list)
    outputs: list[str] = field(default_factory=list)
    writes: bool = False
    refusal: str | None = None

    def used(self, *names: str) -> bool:
        return any(option in names for option, _ in self.options)

    def refuse(self, why: str) -> None:
        self.refusal = self.refusal or why


def _parse(program: str, args: Sequence[str], spec: str, *, stop: bool = False) -> Parsed:
    """GNU getopt_long rules: clusters, attached values, unique prefixes of long options,
    `--`, options after operands (unless `stop`: at the first operand, like git)."""
    table, out, i = _table(spec), Parsed(), 0
    while i < len(args):
        arg, i = args[i], i + 1
        if arg == "--" or (out.operands and stop):  # git: the command keeps its own `--`
            out.operands += args[i - (arg != "--" or bool(out.operands and stop)) :]
            break
        found: list[tuple[str, str | None]] = []
        if arg.startswith("--"):
            name, eq, attached = arg.partition("=")
            name = _resolve(name, table)
            value: str | None = attached if eq else None
            if value is None and table.get(name, _Opt("", "")).value == "required":
                value, i = (args[i], i + 1) if i < len(args) else ("", i)
            found.append((name, value))
        elif arg.startswith("-") and arg != "-":
            for j in range(1, len(arg)):
                name, rest = "-" + arg[j], arg[j + 1 :]
                opt = table.get(name)
                if opt is None or opt.value == "none":
                    out.paths += [rest] if opt is None and rest else []  # -T/tmp: a value?
                    found.append((name, None))
                    continue
                if not rest and opt.value == "required":
                    rest, i = (args[i], i + 1) if i < len(args) else ("", i)
                found.append((name, rest))
                break
        else:
            out.operands.append(arg)
        for name, value in found:
            opt = table.get(name, _Opt("", "path"))  # an unknown option's value: a path
            out.options.append((name, value))
            if opt.kind == "refused":
                out.refuse(f"`{program} {name}` is not allowed: {opt.why or _WHY['']}")
            out.writes |= opt.kind in ("out", "w")
            if value is not None and opt.kind in ("path", "out", "w"):  # sed -i/tmp/* too
                out.paths.append(value)
                out.outputs += [value] if opt.kind == "out" else []
    return out


def _resolve(name: str, table: dict[str, _Opt]) -> str:
    """A long option as getopt reads it: exact, a unique prefix, or a refused one it starts."""
    if name in table:
        return name
    matches = [key for key in table if key.startswith(name) and key.startswith("--")]
    refused = [key for key in matches if table[key].kind == "refused"]
    return (refused or matches)[0] if refused or len(matches) == 1 else name


_LISTING = ("-c", "--stdout", "--to-stdout", "-l", "--list", "-t", "--test", "-p", "-v", "-Z")


def runs_others(name: str) -> bool:
    """A wrapper, an interpreter or an interactive program: its words say little."""
    return name in WRAPPERS or name in _INTERACTIVE or bool(_VERSIONED.fullmatch(name))


Options = list[tuple[str, str | None]]


def parse_options(program: str, args: Sequence[str], spec: str | None = None) -> Parsed:
    """`args` read as the checks read them: by the program's own rule (tar's old style
    too), or by `spec` in the notation of _RULES (`-t` takes a value, `-r.` none)."""
    if spec is not None:
        return _parse(program, args, spec)
    return _tar(program, args) if program == "tar" else _by_rule(program, args)


def parse_git(args: Sequence[str]) -> tuple[Options, str, list[str]]:
    """Git's global options, its command, and the command's own words."""
    head = _parse("git", args, _SPECS["git"][0], stop=True)
    command = head.operands[0] if head.operands else ""
    return head.options, command, head.operands[1:]


def check_program(program: str, args: Sequence[str]) -> ProgramCheck:
    """The paths `program` would touch, whether it writes, and a refusal when an argument
    would run another program or write where the checks cannot follow."""
    name = program.rsplit("/", 1)[-1]
    own = [program] if "/" in program else []  # ./tool names a file too
    if runs_others(name):
        why = "runs other programs, which the checks cannot see; run them directly"
        if name in _INTERACTIVE:
            why = "is interactive and can start a shell; use cat, head or grep instead"
        return ProgramCheck(tuple(own), False, f"`{name}` {why}")
    parsed = {"sed": _sed, "find": _find, "tar": _tar, "git": _git}.get(name, _by_rule)(name, args)
    paths = own + parsed.paths + parsed.operands
    paths += [unquote(urlsplit(p).path) for p in paths if p[:5].lower() == "file:"]  # curl
    paths = [p for p in dict.fromkeys(paths) if p]
    known = name in _SPECS or name in _WRITERS or name in READERS or name == "find"
    outputs = tuple(p for p in parsed.outputs if p)
    return ProgramCheck(tuple(paths), parsed.writes, parsed.refusal, outputs, known)


def _by_rule(name: str, args: Sequence[str], rule: _Rule | None = None) -> Parsed:
    options, flags = rule or _SPECS.get(name, ("", _words("any")))
    parsed = _parse(name, args, options)
    listing = "listing" in flags and parsed.used(*_LISTING)
    parsed.writes |= ("writes" in flags or name in _WRITERS) and not listing
    if name == "uniq" and len(parsed.operands) > 1:  # uniq IN OUT
        parsed.writes, parsed.outputs = True, [*parsed.outputs, parsed.operands[1]]
    if name == "zip" and any(arg.startswith("-TT") for arg in args):
        parsed.refuse("`zip -TT` runs the command it names")
    if "pattern" in flags and not parsed.used("-e", "-f", "--regexp", "--file", "--files"):
        parsed.operands = parsed.operands[1:]
    if "date" in flags and any(not word.startswith("+") for word in parsed.operands):
        parsed.refuse("`date` with an operand other than +FORMAT sets the system clock")
    if "any" in flags:  # no rule: a key=value operand's value may be a path (dd of=x)
        parsed.operands += [word.partition("=")[2] for word in parsed.operands]
    if "none" in flags or "date" in flags:
        parsed.operands = []
    return parsed


def _sed(name: str, args: Sequence[str]) -> Parsed:
    parsed = _by_rule(name, args)
    scripts = [v or "" for option, v in parsed.options if option in ("-e", "--expression")]
    if not scripts and parsed.operands:
        scripts.append(parsed.operands.pop(0))
    for script in scripts:
        if why := sed_script_refusal(script):
            parsed.refuse(f"the sed script {script!r} is not allowed: {why}")
    return parsed


_FIND_VALUE = _words(
    "-name -iname -path -ipath -wholename -iwholename -regex -iregex -lname -ilname -type "
    "-xtype -user -group -uid -gid -perm -size -mtime -atime -ctime -mmin -amin -cmin -used "
    "-inum -links -maxdepth -mindepth -fstype -context -printf -regextype -D"
)
_FIND_PATH = _words("-newer -anewer -cnewer -samefile -files0-from")
_FIND_OUT = {"-fprint": 1, "-fprint0": 1, "-fls": 1, "-fprintf": 2, "-delete": 0}  # writes


def _find(name: str, args: Sequence[str]) -> Parsed:
    """Starting points and file arguments are paths; -exec and its kind run programs."""
    out, i = Parsed(), 0
    while i < len(args):
        arg, i = args[i], i + 1
        if arg in ("-exec", "-execdir", "-ok", "-okdir"):
            out.refuse(f"`find {arg}` runs another program; list the files, then run it")
        elif arg in _FIND_OUT or arg in _FIND_PATH or re.fullmatch(r"-newer[aBcm][aBcmt]", arg):
            count = _FIND_OUT.get(arg, 1)
            out.paths += args[i : i + min(count, 1)]
            out.outputs += args[i : i + min(count, 1)]
            out.writes, i = out.writes or arg in _FIND_OUT, i + count
        elif arg in _FIND_VALUE:
            i += 1
        elif not re.fullmatch(r"-[a-z_0-9]+|[()!,]", arg):
            out.paths.append(arg)  # a starting point, or a word no rule explains
    return out


def _tar(name: str, args: Sequence[str]) -> Parsed:
    """Old-style `tar czf out.tgz dir` is read as `tar -c -z -f out.tgz dir`."""
    words = list(args)
    if words and not words[0].startswith("-"):
        bundle, rest, words = words[0], words[1:], []
        for letter in bundle:
            taken = [rest.pop(0)] if letter in "fCTXgNbHKLVIF" and rest else []
            words += ["-" + letter, *taken]
        words += rest
    parsed = _by_rule(name, words)
    archives = [value or "" for option, value in parsed.options if option in ("-f", "--file")]
    if any(":" in archive for archive in archives) and "--force-local" not in words:
        parsed.refuse("`tar -f host:file` runs a remote shell; name a local archive")
    return parsed


# branch and tag only list with no operands, or with -l; other options change refs
_GIT_LISTING = _words(
    "-l --list -a --all -r --remotes -v -vv --verbose --contains --no-contains --merged "
    "--no-merged --points-at --sort --format --column --no-column --show-current -n --color "
    "-i --ignore-case"
)


def _git(name: str, args: Sequence[str]) -> Parsed:
    """Global options, then a built-in command (another name may be an alias that runs a
    shell), then its arguments. Every operand is path-checked: revisions pass as paths."""
    head = _parse("git", args, _SPECS["git"][0], stop=True)
    if head.refusal or not head.operands:
        return head
    command = head.operands[0]
    options, flags = _SPECS.get("git:" + command, ("", _words("runs unknown")))
    if "runs" in flags:
        why = "an unknown command may be an alias" if "unknown" in flags else "it runs programs"
        head.refuse(f"`git {command}` is not allowed: {why}")
        return head
    options = "--ext-diff.! --output!out " + options  # refused for every command
    parsed = _by_rule(f"git {command}", head.operands[1:], (options, flags))
    parsed.paths += head.paths
    first = parsed.operands[0] if parsed.operands else ""
    if command in ("submodule", "bisect") and first in ("foreach", "run", "visualize", "view"):
        parsed.refuse(f"`git {command} {first}` runs other programs")
    if any(operand.startswith("ext::") for operand in parsed.operands):
        parsed.refuse("the ext:: transport runs a shell command")
    if command == "config" and (len(parsed.operands) > 1 or first in ("set", "unset")):
        parsed.refuse(f"`git config {first}` is not allowed: {_WHY['config']}")
    if command in ("branch", "tag"):
        listing = not parsed.operands or parsed.used("-l", "--list")
        changes = any(option not in _GIT_LISTING for option, _ in parsed.options)
        parsed.writes |= changes or not listing
    for reads in (f[6:].split(",") for f in flags if f.startswith("reads=")):
        parsed.writes |= first not in reads
    return parsed
