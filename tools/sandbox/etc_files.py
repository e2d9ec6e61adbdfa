"""What of /etc a sandboxed command sees: only the files programs need to start and work.

/etc holds the host's configuration — its name, mounts, cron tables, service settings,
keys — and a command needs little of it. Both sandboxes expose exactly ETC_ALLOWED (the
entries that exist; a folder with what is in it), found by tracing what `sh`, `ls -l`,
`date`, `grep`, `git`, `python3 -c` (ssl, sockets, mimetypes), `node`, `id`, `tar`, `ps`
open there, plus the certificate layouts of Fedora and Arch:

- the loader: ld.so.cache, ld.so.conf, ld.so.conf.d/, ld.so.preload;
- names: passwd and group (user names for `ls -l`, `id`; no password is in them),
  nsswitch.conf, hosts, host.conf, resolv.conf, gai.conf, services, protocols. Under
  bubblewrap passwd and group are generated (`minimal_names`): root and the running user,
  as Flatpak does, not the host's accounts. Landlock cannot change what a file holds, only
  allow or deny its path: there a command reads the host's passwd and group;
- TLS: ssl/certs/, ssl/openssl.cnf, ca-certificates/, pki/tls/certs/, pki/tls/cert.pem,
  pki/tls/openssl.cnf, pki/ca-trust/extracted/, crypto-policies/back-ends/, gnutls/;
- time: localtime, timezone;
- read at start: alternatives/ (Debian's links behind /usr/bin/awk and friends),
  mime.types, gitconfig, gitattributes (git warns when it may not read them),
  python3/ and python3.X/ (Debian's python3 imports sitecustomize.py from there), magic
  and magic.mime (`file` fails when it may not read them), manpath.config (`man`).

bubblewrap binds only these (links recreated as links); Landlock grants only these, and
not /etc itself, so `ls /etc` fails there while bubblewrap lists the names above. A link
is followed where it leads: to a file under /usr (localtime) that is readable anyway, to
a listed entry, or to a file outside the system folders (resolv.conf in /run under
systemd-resolved), which is exposed on its own. Anything else (hostname, machine-id,
fstab, shadow, ssh/, cron.d/, …) does not exist for a command.
"""

from __future__ import annotations

import functools
import glob
import grp
import os
import pwd
import time
from dataclasses import dataclass
from pathlib import Path

ETC = Path("/etc")
ETC_ALLOWED = (
    # the loader
    "ld.so.cache",
    "ld.so.conf",
    "ld.so.conf.d",
    "ld.so.preload",
    # names
    "passwd",
    "group",
    "nsswitch.conf",
    "hosts",
    "host.conf",
    "resolv.conf",
    "gai.conf",
    "services",
    "protocols",
    # TLS
    "ssl/certs",
    "ssl/openssl.cnf",
    "ca-certificates",
    "pki/tls/certs",
    "pki/tls/cert.pem",
    "pki/tls/openssl.cnf",
    "pki/ca-trust/extracted",
    "crypto-policies/back-ends",
    "gnutls",
    # time
    "localtime",
    "timezone",
    # read at start
    "alternatives",
    "mime.types",
    "gitconfig",
    "gitattributes",
    "python3",
    "python3.*",
    "magic",
    "magic.mime",
    "manpath.config",
)
FRESH_S = 2.0
# Where a listed link's target is never exposed on its own: the kernel's views (/etc/mtab
# is /proc/self/mounts, whose resolved path names the runtime's own pid).
_NOT_TARGETS = (Path("/proc"), Path("/sys"), Path("/dev"))


_cache: dict[tuple[Path, ...], tuple[float, EtcView]] = {}


@dataclass(frozen=True)
class EtcView:
    """The listed entries of /etc as they are now."""

    links: tuple[tuple[Path, str], ...]  # entries that are symlinks, with their target text
    reads: tuple[Path, ...]  # real paths to expose read-only at their own place
    folders: tuple[Path, ...]  # folders under /etc holding a listed entry (ssl for ssl/certs)


def etc_view(roots: list[Path]) -> EtcView:
    """The entries of ETC_ALLOWED that exist. `roots`: the system folders exposed whole,
    where a link's target needs nothing more. Looked at again after FRESH_S: /etc changes
    seldom (resolv.conf turned into a link), and looking costs about half a millisecond."""
    key = tuple(roots)
    cached = _cache.get(key)
    if cached is not None and time.monotonic() - cached[0] < FRESH_S:
        return cached[1]
    found = _look(roots)
    _cache.clear()
    _cache[key] = (time.monotonic(), found)
    return found


def _look(roots: list[Path]) -> EtcView:
    links: list[tuple[Path, str]] = []
    reads: list[Path] = []
    folders: set[Path] = set()
    for path in _listed():
        if os.path.realpath(path.parent) != str(path.parent):
            continue  # reached through a link: it is not where the list says
        folders.update(p for p in path.parents if ETC in p.parents)
        if path.is_symlink():
            links.append((path, os.readlink(path)))
            target = path.resolve()
            if _outside_target(target, roots):
                reads.append(target)
        elif path.exists():
            reads.append(path)
    return EtcView(tuple(links), tuple(dict.fromkeys(reads)), tuple(sorted(folders)))


def _listed() -> list[Path]:
    found: list[Path] = []
    for name in ETC_ALLOWED:
        if any(char in name for char in "*?["):
            found += sorted(Path(p) for p in glob.glob(str(ETC / name)))
        elif os.path.lexists(ETC / name):
            found.append(ETC / name)
    return found


def _outside_target(target: Path, roots: list[Path]) -> bool:
    """A regular file a listed link leads to, that nothing else exposes: not in /etc (the
    list decides there), not in a system folder, not one of the kernel's views."""
    if not target.is_file() or target == ETC or ETC in target.parents:
        return False
    return not any(root in target.parents for root in (*roots, *_NOT_TARGETS))


# Generated under bubblewrap instead of copied: the host's accounts are not a command's
# business (issue 36). Landlock only allows or denies a path and cannot change what a file
# holds: its launcher grants these two as they are, so there the host's accounts read.
GENERATED = (ETC / "passwd", ETC / "group")


@functools.cache
def minimal_names() -> dict[Path, str]:
    """/etc/passwd and /etc/group holding root and the running user only: enough for `id`,
    `ls -l` and `whoami`, and nothing of the host's other accounts. No password is in them."""
    uid, gid = os.getuid(), os.getgid()
    passwd = dict.fromkeys([_user(0, 0), _user(uid, gid)])
    groups = dict.fromkeys([_group(0), _group(gid)])
    return {GENERATED[0]: "".join(passwd), GENERATED[1]: "".join(groups)}


def _user(uid: int, gid: int) -> str:
    try:
        user = pwd.getpwuid(uid)
        name, gecos, home, shell = user.pw_name, user.pw_gecos, user.pw_dir, user.pw_shell
    except KeyError:  # a uid the host does not name (a container's)
        name = "root" if uid == 0 else f"user{uid}"
        gecos, home, shell = name, "/root" if uid == 0 else "/", ""
    return f"{name}:x:{uid}:{gid}:{gecos}:{home}:{shell or '/bin/sh'}\n"


def _group(gid: int) -> str:
    try:
        name = grp.getgrgid(gid).gr_name
    except KeyError:
        name = "root" if gid == 0 else f"group{gid}"
    return f"{name}:x:{gid}:\n"
