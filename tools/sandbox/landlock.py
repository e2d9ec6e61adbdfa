"""A small ctypes binding of Linux Landlock, plus the prctl/capset calls a child makes
before it is confined.

The split follows what is safe where: a `Ruleset` is built in the parent (it opens
files, allocates, may fail with a readable error), while `confine` runs in the child
between fork and exec and therefore only makes syscalls with arguments prepared here.

Syscall numbers 444-446 come from the unified table: the same on x86_64 and aarch64.
"""

from __future__ import annotations

import ctypes
import errno
import os
import stat
from collections.abc import Collection
from pathlib import Path

_SYS_CREATE_RULESET = 444
_SYS_ADD_RULE = 445
_SYS_RESTRICT_SELF = 446
_CREATE_RULESET_VERSION = 1 << 0
_RULE_PATH_BENEATH = 1

_PR_CAPBSET_DROP = 24
_PR_SET_NO_NEW_PRIVS = 38
_PR_CAP_AMBIENT = 47
_PR_CAP_AMBIENT_CLEAR_ALL = 4
_CAPABILITY_VERSION_3 = 0x20080522
_EINVAL = errno.EINVAL

# Filesystem access rights (ABI 1 unless noted).
EXECUTE = 1 << 0
WRITE_FILE = 1 << 1
READ_FILE = 1 << 2
READ_DIR = 1 << 3
REMOVE_DIR = 1 << 4
REMOVE_FILE = 1 << 5
MAKE_CHAR = 1 << 6
MAKE_DIR = 1 << 7
MAKE_REG = 1 << 8
MAKE_SOCK = 1 << 9
MAKE_FIFO = 1 << 10
MAKE_BLOCK = 1 << 11
MAKE_SYM = 1 << 12
REFER = 1 << 13  # ABI 2: rename/link between folders
TRUNCATE = 1 << 14  # ABI 3: truncate(2) and open(O_TRUNC)
IOCTL_DEV = 1 << 15  # ABI 5: ioctl on device files
# Rights that make sense on a file (the kernel refuses the others on a non-directory).
FILE_RIGHTS = EXECUTE | WRITE_FILE | READ_FILE | TRUNCATE | IOCTL_DEV

# Network access rights (ABI 4): TCP only; UDP, raw and Unix sockets are not covered.
BIND_TCP = 1 << 0
CONNECT_TCP = 1 << 1

# Scopes (ABI 6): no reaching outside the domain through these IPC channels.
SCOPE_ABSTRACT_UNIX_SOCKET = 1 << 0
SCOPE_SIGNAL = 1 << 1


class _RulesetAttr(ctypes.Structure):
    _fields_ = (
        ("handled_access_fs", ctypes.c_uint64),
        ("handled_access_net", ctypes.c_uint64),
        ("scoped", ctypes.c_uint64),
    )


class _PathBeneathAttr(ctypes.Structure):
    _pack_ = 1  # packed in the kernel's uapi header
    _fields_ = (("allowed_access", ctypes.c_uint64), ("parent_fd", ctypes.c_int32))


class _CapHeader(ctypes.Structure):
    _fields_ = (("version", ctypes.c_uint32), ("pid", ctypes.c_int))


class _CapData(ctypes.Structure):
    _fields_ = (
        ("effective", ctypes.c_uint32),
        ("permitted", ctypes.c_uint32),
        ("inheritable", ctypes.c_uint32),
    )


_libc = ctypes.CDLL(None, use_errno=True)
_syscall = _libc.syscall
_syscall.restype = ctypes.c_long
_prctl = _libc.prctl
_prctl.restype = ctypes.c_int
_prctl.argtypes = (ctypes.c_int, ctypes.c_ulong, ctypes.c_ulong, ctypes.c_ulong, ctypes.c_ulong)
_capset = _libc.capset
_capset.restype = ctypes.c_int
_capset.argtypes = (ctypes.c_void_p, ctypes.c_void_p)


def _check(result: int, what: str) -> int:
    if result < 0:
        code = ctypes.get_errno()
        raise OSError(code, f"{what}: {os.strerror(code)}")
    return result


def abi_version() -> int:
    """The Landlock ABI the kernel offers; OSError (ENOSYS, EOPNOTSUPP) when it has none."""
    result = _syscall(
        ctypes.c_long(_SYS_CREATE_RULESET),
        ctypes.c_void_p(None),
        ctypes.c_size_t(0),
        ctypes.c_uint32(_CREATE_RULESET_VERSION),
    )
    return _check(result, "landlock_create_ruleset")


def fs_rights(abi: int) -> int:
    """Every filesystem right the given ABI knows: all are handled, so all not granted are
    denied (a right an older kernel does not know would make it refuse the ruleset)."""
    rights = (1 << 13) - 1
    if abi >= 2:
        rights |= REFER
    if abi >= 3:
        rights |= TRUNCATE
    if abi >= 5:
        rights |= IOCTL_DEV
    return rights


def net_rights(abi: int) -> int:
    return BIND_TCP | CONNECT_TCP if abi >= 4 else 0


def scopes(abi: int) -> int:
    return SCOPE_ABSTRACT_UNIX_SOCKET | SCOPE_SIGNAL if abi >= 6 else 0


class Ruleset:
    """A ruleset not yet enforced: an fd the parent fills and a forked child enforces.

    Handled rights that no rule grants are denied; handled network rights with no port
    rule deny every TCP bind and connect.
    """

    def __init__(self, handled_fs: int, handled_net: int = 0, scoped: int = 0) -> None:
        attr = _RulesetAttr(handled_fs, handled_net, scoped)
        self.fd = _check(
            _syscall(
                ctypes.c_long(_SYS_CREATE_RULESET),
                ctypes.byref(attr),
                ctypes.c_size_t(ctypes.sizeof(attr)),
                ctypes.c_uint32(0),
            ),
            "landlock_create_ruleset",
        )
        self._handled_fs = handled_fs

    def allow(self, path: str | os.PathLike[str], access: int, *, follow: bool = True) -> bool:
        """Grant `access` on `path` and everything beneath it. False when the path is
        missing, or is a symlink and follow is False (a link must not widen the grant)."""
        flags = os.O_PATH | os.O_CLOEXEC | (0 if follow else os.O_NOFOLLOW)
        try:
            fd = os.open(path, flags)
        except FileNotFoundError:
            return False
        try:
            mode = os.fstat(fd).st_mode
            if stat.S_ISLNK(mode):
                return False
            if not stat.S_ISDIR(mode):
                access &= FILE_RIGHTS
            attr = _PathBeneathAttr(access & self._handled_fs, fd)
            _check(
                _syscall(
                    ctypes.c_long(_SYS_ADD_RULE),
                    ctypes.c_int(self.fd),
                    ctypes.c_int(_RULE_PATH_BENEATH),
                    ctypes.byref(attr),
                    ctypes.c_uint32(0),
                ),
                f"landlock_add_rule({os.fsdecode(path)})",
            )
        finally:
            os.close(fd)
        return True

    def allow_tree(
        self,
        root: Path,
        access: int,
        hidden: Collection[Path] = (),
        read_only: Collection[Path] = (),
    ) -> None:
        """Grant `access` on the tree at root except the hidden paths in it, and only the
        reading part of it on the `read_only` ones. Landlock cannot take a subtree out of a
        grant, so the tree is granted child by child; the folders on the way to a hidden or
        read-only path keep READ_DIR only (names stay listable). A hidden path that does not
        exist is never granted: nothing can create it, since nothing can be created in its
        list-only folder, and one made later by someone else gets no rule."""
        if root in hidden:
            return
        if root in read_only:
            self.allow_tree(root, access & (EXECUTE | READ_FILE | READ_DIR), hidden)
            return
        below = str(root).rstrip("/") + "/"  # resolved paths: a prefix is a subtree
        inner = [path for path in hidden if str(path).startswith(below)]
        kept = [path for path in read_only if str(path).startswith(below)]
        if not inner and not kept:
            self.allow(root, access, follow=False)
            return
        self.allow(root, access & READ_DIR, follow=False)
        with os.scandir(root) as entries:
            for entry in entries:
                if not entry.is_symlink():  # a link must not carry the grant elsewhere
                    self.allow_tree(Path(entry.path), access, inner, kept)

    def close(self) -> None:
        if self.fd >= 0:
            os.close(self.fd)
            self.fd = -1


class Confinement:
    """What a child does between fork and exec, with every argument prepared here so that
    the child only makes syscalls (preexec_fn runs in a copy of a possibly threaded parent).
    """

    def __init__(self, ruleset: Ruleset, *, drop_capabilities: bool) -> None:
        self._ruleset = ruleset
        self._last_cap = _last_capability() if drop_capabilities else -1
        self._header = _CapHeader(_CAPABILITY_VERSION_3, 0)
        self._data = (_CapData * 2)()

    def __call__(self) -> None:
        """Drop capabilities (root keeps none across exec), then enforce the ruleset."""
        if self._last_cap >= 0:
            for cap in range(self._last_cap + 1):
                if _prctl(_PR_CAPBSET_DROP, cap, 0, 0, 0) < 0 and ctypes.get_errno() != _EINVAL:
                    _check(-1, "PR_CAPBSET_DROP")  # EINVAL: a capability this kernel lacks
            _check(_prctl(_PR_CAP_AMBIENT, _PR_CAP_AMBIENT_CLEAR_ALL, 0, 0, 0), "ambient")
            _check(_capset(ctypes.addressof(self._header), ctypes.addressof(self._data)), "capset")
        _check(_prctl(_PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0), "PR_SET_NO_NEW_PRIVS")
        _check(
            _syscall(
                ctypes.c_long(_SYS_RESTRICT_SELF),
                ctypes.c_int(self._ruleset.fd),
                ctypes.c_uint32(0),
            ),
            "landlock_restrict_self",
        )


def _last_capability() -> int:
    try:
        with open("/proc/sys/kernel/cap_last_cap") as file:
            return int(file.read())
    except (OSError, ValueError):
        return 63  # the child skips the numbers this kernel does not know
