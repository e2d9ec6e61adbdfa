"""The home folder and the workspace: created from the bundled templates, never overwritten."""

from __future__ import annotations

import errno
from dataclasses import dataclass, field
from pathlib import Path

from agent.home import PRIVATE_DIR_MODE, create_private_file, secure_home
from tools.boundaries import INBOX
from tools.paths import PathRules, PolicyError

# The templates ship beside the packages: <repo or site-packages>/workspace/*.md.
TEMPLATES_DIR = Path(__file__).resolve().parent.parent / "workspace"
BUNDLED_SKILLS_DIR = Path(__file__).resolve().parent.parent / "skills"
# config.example.toml is linked into the package so that an installed wheel carries it.
CONFIG_TEMPLATE = Path(__file__).resolve().parent / "config.example.toml"

BOOTSTRAP_FILES = (
    "AGENTS.md",
    "SOUL.md",
    "TOOLS.md",
    "IDENTITY.md",
    "USER.md",
    "HEARTBEAT.md",
    "BOOTSTRAP.md",
    "MEMORY.md",
)
# Templates that only say what goes in their file: the compact prompt leaves such a file out
# while it holds nothing else (a small model reads every token of its first request).
PLACEHOLDER_FILES = ("TOOLS.md", "USER.md", "MEMORY.md")
SKILLS = "skills"
BOOTSTRAP_FLOOR_CHARS = 500  # the prompt budget never cuts a workspace file below this
MAX_BOOTSTRAP_BYTES = 4 * 1024 * 1024  # read at most this much of one file for the prompt


@dataclass
class InitReport:
    created: list[Path] = field(default_factory=list)
    kept: list[Path] = field(default_factory=list)
    tightened: str | None = None  # the line saying which modes of an older home were fixed


def init_home(home: Path, workspace: Path, config_file: Path | None) -> InitReport:
    """Create what is missing of the home folder (the owner's alone, 0700), its config.toml
    (0600: it names the people and their ids) and the workspace."""
    report = InitReport(tightened=secure_home(home, workspace))
    if config_file is not None:
        template = CONFIG_TEMPLATE.read_text(encoding="utf-8")
        _copy_if_missing(template, config_file, report, private=True)
    init_workspace(workspace, report)
    return report


def init_workspace(workspace: Path, report: InitReport | None = None) -> InitReport:
    report = report or InitReport()
    # 0700: its files (MEMORY.md, USER.md, what people sent) are no other user's business;
    # inside it, files keep the modes the programs that write them give.
    try:
        workspace.mkdir(mode=PRIVATE_DIR_MODE, parents=True, exist_ok=True)
    except FileExistsError:  # a file stands there: said as such (agent/cli/user_errors.py)
        raise NotADirectoryError(errno.ENOTDIR, "not a folder", str(workspace)) from None
    (workspace / INBOX).mkdir(exist_ok=True)
    # The owner's skills go here; the bundled ones are read where they ship, not copied,
    # so an upgrade brings their new versions (a folder here of the same name wins).
    (workspace / SKILLS).mkdir(exist_ok=True)
    for name in BOOTSTRAP_FILES:
        _copy_if_missing(
            (TEMPLATES_DIR / name).read_text(encoding="utf-8"), workspace / name, report
        )
    return report


def ensure_workspace(workspace: Path) -> bool:
    """Initialise a missing workspace; True when it had to be created."""
    if workspace.is_dir():
        return False
    init_workspace(workspace)
    return True


def _copy_if_missing(text: str, target: Path, report: InitReport, *, private: bool = False) -> None:
    if target.exists():
        report.kept.append(target)
        return
    target.parent.mkdir(parents=True, exist_ok=True)
    if private:
        create_private_file(target, text)
    else:
        target.write_text(text, encoding="utf-8")
    report.created.append(target)


@dataclass(frozen=True)
class BootstrapBlock:
    """One workspace file as the prompt shows it."""

    text: str  # "" when the file is empty: it is left out
    chars: int  # characters of the file's content counted against the total cap
    missing: bool = False


def read_bootstrap_file(
    files: PathRules, name: str, limit: int, scale: float = 1.0
) -> BootstrapBlock:
    """The file's content without front matter, cut at `limit` characters (not bytes).

    `scale` < 1 is the token budget cutting every file by the same proportion, never
    below a floor, and only where the cut saves more than its marker costs. A missing
    file gives a one-line marker, so the model knows to expect it; one the resolver
    refuses (a link, a hard link from outside, not a regular file) a one-line note, and
    nothing of it is read.
    """
    path = files.workspace / name
    try:
        data = files.read_bytes(name, MAX_BOOTSTRAP_BYTES)
    except PolicyError as exc:
        return BootstrapBlock(f"[left out: {name}: {exc.short}]", 0, missing=True)
    except FileNotFoundError:
        return BootstrapBlock(
            f"[missing: {name} — create it in the workspace to use it]", 0, missing=True
        )
    except OSError as exc:
        return BootstrapBlock(f"[unreadable: {name}: {exc.strerror}]", 0, missing=True)
    raw = data.decode("utf-8", errors="replace")
    content = strip_front_matter(raw).strip()
    if not content:
        return BootstrapBlock("", 0)
    if limit <= 0:
        return BootstrapBlock(
            f"[omitted: the workspace files' total limit is reached; read {path} for it]", 0
        )
    if scale < 1.0:
        scaled = max(BOOTSTRAP_FLOOR_CHARS, int(len(content) * scale))
        if len(content) - scaled > len(_truncated_marker(scaled, path)):
            limit = min(limit, scaled)
    if len(content) <= limit:
        return BootstrapBlock(content, len(content))
    return BootstrapBlock(content[:limit] + _truncated_marker(limit, path), limit)


def holds_only_its_template(name: str, content: str) -> bool:
    """`content` (a block as read_bootstrap_file gives it) is still the placeholder that
    `agent init` wrote in one of PLACEHOLDER_FILES."""
    if name not in PLACEHOLDER_FILES:
        return False
    try:
        template = (TEMPLATES_DIR / name).read_text(encoding="utf-8")
    except OSError:
        return False
    return strip_front_matter(template).strip() == content.strip()


def _truncated_marker(limit: int, path: Path) -> str:
    return f"\n\n[... truncated at {limit} characters; the full file is {path}]"


def strip_front_matter(text: str) -> str:
    """Drop a leading YAML front-matter block (`---` ... `---`): metadata, not instructions."""
    text = text.lstrip("\ufeff")  # a byte-order mark is not content either
    lines = text.splitlines(keepends=True)
    if not lines or lines[0].strip() != "---":
        return text
    for index, line in enumerate(lines[1:], start=1):
        if line.strip() in ("---", "..."):
            return "".join(lines[index + 1 :])
    return text
