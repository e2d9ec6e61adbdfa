"""Network from the shell is one rule: when a command's sandbox has the network, and what
the owner is asked first.

A parser cannot tell what a script will reach (`python3 x.py`, bash's `/dev/tcp` with the
path built at run time, a DNS query), so the network is a property of the launch, not of
the words: the OS sandbox runs a command without it (bubblewrap: its own empty network
namespace; Landlock ABI >= 4: no TCP connect or bind, UDP such as DNS still passes) unless
the owner approved that command with network access.

- `supervised`, `read_only`: a program whose job is reaching the network (curl, wget, git's
  remote commands, nc, dig…: `reaches_network`) asks first, the question saying it would
  run with network access, and runs with it only when approved (read_only asks nothing:
  such a program is refused there). Every other command runs offline.
- `full`: the network as `[security] sandbox_network` says, unless the turn is tainted.
- A tainted turn (tools/taint.py), at every level: the network only for a command the owner
  approved, the question naming what was read; at `full` every command asks. Its rules
  are asked each time ("Always allow" in such a turn remembers nothing), and only the owner
  may answer (`owner_only`).
"""

from __future__ import annotations

import os
import re
from collections.abc import Sequence
from dataclasses import dataclass

from tools.base import ASK_EACH_TIME, ApprovalRequest
from tools.shell.program_rules import parse_git
from tools.taint import Taint


def _words(text: str) -> frozenset[str]:
    return frozenset(text.split())


# Programs whose job is reaching another machine: any use of them counts.
NETWORK_PROGRAMS = _words(
    "curl wget wget2 aria2c axel lftp ftp sftp tftp telnet ssh scp rsync mosh nc ncat netcat "
    "socat dig nslookup host drill delv whois ping ping6 traceroute traceroute6 tracepath mtr "
    "http https xh httpie openssl smbclient ldapsearch mosquitto_pub mosquitto_sub "
    "pip pip3 pipx uv uvx npm npx yarn pnpm bun deno gem cargo go apt apt-get brew "
    "conda mamba git-lfs svn hg"
)
_VERSIONED_PIP = re.compile(r"pip[\d.]*")
# git commands that talk to a remote; `git remote X` and `git submodule X` by their X.
_GIT_REMOTE = _words("clone fetch pull push ls-remote fetch-pack send-pack request-pull send-email")
_GIT_REMOTE_SUB = {
    "remote": _words("update prune show set-head"),
    "submodule": _words("update add sync"),
}


def reaches_network(program: str, args: Sequence[str]) -> str | None:
    """What of this command reaches the network, as the owner will read it ("curl", "git
    ls-remote"); None when its job is not reaching the network (a script may still try: the
    sandbox answers that)."""
    name = os.path.basename(program)
    if name in NETWORK_PROGRAMS or _VERSIONED_PIP.fullmatch(name):
        return name
    if name != "git":
        return None
    _options, command, rest = parse_git(args)
    if command in _GIT_REMOTE or (command == "archive" and any("--remote" in a for a in rest)):
        return f"git {command}"
    sub = next((word for word in rest if not word.startswith("-")), "")
    if sub in _GIT_REMOTE_SUB.get(command, ()):
        if command == "remote" and sub == "show" and "-n" in rest:
            return None  # `git remote show -n`: the configured names only
        return f"git {command} {sub}"
    return None


def network_reason(what: str) -> str:
    """Why a network program asks, at supervised."""
    return f"{what} reaches the network: approved, it runs with network access"


@dataclass(frozen=True)
class Gate:
    """What the owner is asked before a shell command runs (None: nothing), and whether its
    sandbox has the network once it may run."""

    request: ApprovalRequest | None
    online: bool


def gate(
    tool: str,
    action: str,
    *,
    autonomy: str,
    asks: tuple[str, ...],
    rules: tuple[str, ...],
    covers: str,
    network: tuple[str, ...],
    taint: Taint,
    sandbox_network: bool,
) -> Gate:
    """The question and the network for a checked command: `asks`, `rules`, `covers` and
    `network` are its plan's (tools/shell/plan.py), `sandbox_network` the owner's setting."""
    if autonomy == "full":
        if not taint.tainted:
            return Gate(None, sandbox_network)
        with_net = (
            "approved, it runs with network access"
            if sandbox_network
            else ("approved, it runs (without network: [security] sandbox_network is off)")
        )
        reason = (
            f"{'network access' if sandbox_network else 'a command'} {taint.why()}: at "
            f"autonomy full every command of a turn that read untrusted content asks; {with_net}"
        )
        rules = (f"{ASK_EACH_TIME}shell after untrusted content",)
        request = ApprovalRequest(tool, action, reason, rules, _TAINTED, owner_only=True)
        return Gate(request, sandbox_network)
    online = bool(network) and sandbox_network
    if not asks:
        return Gate(None, False)
    if not taint.tainted:
        return Gate(ApprovalRequest(tool, action, "; ".join(asks), rules, covers), online)
    said = f"network access {taint.why()}" if online else f"asked each time {taint.why()}"
    each_time = tuple(r if r.startswith(ASK_EACH_TIME) else ASK_EACH_TIME + r for r in rules)
    reasons = "; ".join((*asks, said))
    request = ApprovalRequest(tool, action, reasons, each_time, _TAINTED, owner_only=True)
    return Gate(request, online)


_TAINTED = (
    "Always allow covers nothing here: in a turn that read untrusted content, each approval "
    "is asked each time"
)
