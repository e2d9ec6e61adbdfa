"""Links made through a side door, tried under supervised with each OS sandbox: a program
that can make a symbolic or hard link is refused, or runs so that it cannot, even when the
owner approves everything asked. Asserted on the world: no link in the workspace but those
the owner planted, `readlink` failing on what was written, the files outside byte for byte
as they were. The decisions are listed in tools/shell/links.py's docstring."""

from __future__ import annotations

import io
import os
import stat
import tarfile
import zipfile
from pathlib import Path

import pytest
from attack_world import (
    SANDBOXES,
    Owner,
    World,
    git,
    lexists,
    needs,
    needs_sandbox,
    policy_for,
    run,
    shell,
)
from attack_world import world as world  # the fixture

from tools.paths import PolicyError
from tools.shell.effects import archives
from tools.shell.plan import plan_command

pytestmark = needs_sandbox
LINK_PATCH = """\
diff --git a/AGENTS.md b/AGENTS.md
new file mode 120000
index 0000000..e1fd6d8
--- /dev/null
+++ b/AGENTS.md
@@ -0,0 +1 @@
+../config.toml
\\ No newline at end of file
"""


def assert_plain_file(path: Path, text: str) -> None:
    """`path` holds `text` and is no link: readlink fails on it."""
    assert not path.is_symlink() and path.read_text() == text
    with pytest.raises(OSError):
        os.readlink(path)


def test_the_patch_makes_a_link_where_nothing_guards(tmp_path: Path) -> None:
    """The control: the owner's own `git apply`, outside pinclaw, makes the link."""
    (tmp_path / "p.diff").write_text(LINK_PATCH)
    git(tmp_path, "apply", "p.diff")
    assert os.readlink(tmp_path / "AGENTS.md") == "../config.toml"


@pytest.mark.parametrize("sandbox", SANDBOXES)
@pytest.mark.parametrize("repo", [False, True], ids=["plain-folder", "repository"])
async def test_git_apply_writes_the_link_as_a_plain_file(
    world: World, sandbox: str, repo: bool
) -> None:
    (world.workspace / "AGENTS.md").unlink()  # as after `mv AGENTS.md x`
    (world.workspace / "p.diff").write_text(LINK_PATCH)
    if repo:
        git(world.workspace, "init", "-q")
    before = world.outside_files()
    owner = Owner(answer=True)
    result = await shell(world, "git apply p.diff", sandbox=sandbox, owner=owner)
    assert result.output.startswith("exit code: 0"), result.output
    assert_plain_file(world.workspace / "AGENTS.md", "../config.toml")
    assert world.links() == [] and world.outside_files() == before
    assert "each-time:AGENTS.md" in owner.asked[0].rules  # an identity file: asked each time


def linked_repo(world: World) -> str:
    """The workspace as a repository whose branch `links` holds two links, one leading to
    the config, one to a file outside; main (checked out) holds none. Returns the commit."""
    ws = world.workspace
    git(ws, "init", "-q", "-b", "main")
    git(ws, "config", "user.name", "Owner")
    git(ws, "config", "user.email", "owner@example.org")
    git(ws, "add", "-A")
    git(ws, "commit", "-qm", "base")
    git(ws, "checkout", "-q", "-b", "links")
    os.symlink("../config.toml", ws / "LINK.md")
    os.symlink(world.outside / "secret.txt", ws / "IDENTITY.md")
    git(ws, "add", "-A")
    git(ws, "commit", "-qm", "links")
    commit = git(ws, "rev-parse", "HEAD").strip()
    (ws / "links.mbox").write_text(git(ws, "format-patch", "-1", "--stdout", commit))
    git(ws, "checkout", "-q", "main")
    git(ws, "init", "-q", "-b", "main", "src")  # a repository to clone, holding a link
    os.symlink("../config.toml", ws / "src" / "LINK.md")
    git(ws / "src", "add", "-A")
    git(ws / "src", "commit", "-qm", "link")
    return commit


GIT_LINK_COMMANDS = """
git checkout links
git switch links
git merge --ff-only links
git reset --hard links
git cherry-pick {commit}
git am links.mbox
git restore --source=links LINK.md IDENTITY.md
git checkout links -- LINK.md
git pull --ff-only . links
git clone -q src copy
git read-tree -u --reset links
""".strip().splitlines()


@needs("git")
@pytest.mark.parametrize("sandbox", SANDBOXES)
@pytest.mark.parametrize("command", GIT_LINK_COMMANDS)
async def test_git_brings_committed_links_in_as_plain_files(
    world: World, sandbox: str, command: str
) -> None:
    commit = linked_repo(world)
    before, links = world.outside_files(), world.links()
    owner = Owner(answer=True)
    result = await shell(world, command.format(commit=commit), sandbox=sandbox, owner=owner)
    assert result.output.startswith("exit code: 0"), result.output
    assert world.links() == links == ["src/LINK.md"]  # the owner's own, untouched
    folder = world.workspace / ("copy" if "clone" in command else "")
    assert_plain_file(folder / "LINK.md", "../config.toml")
    assert world.outside_files() == before


@needs("git")
async def test_git_stash_pop_brings_a_stashed_link_in_as_a_plain_file(world: World) -> None:
    linked_repo(world)
    os.symlink("../config.toml", world.workspace / "SOUL2.md")
    git(world.workspace, "add", "SOUL2.md")
    git(world.workspace, "stash", "-q")
    assert not lexists(world.workspace / "SOUL2.md")
    result = await shell(world, "git stash pop", owner=Owner(answer=True))
    assert result.output.startswith("exit code: 0"), result.output
    assert_plain_file(world.workspace / "SOUL2.md", "../config.toml")
    assert world.links() == ["src/LINK.md"]


def make_tar(path: Path, *, link: str = "", hard: str = "", compress: str = "") -> None:
    """A tar holding ok.txt (setuid, another owner's) and, if asked, a symbolic link or a
    hard link named `link`/`hard`."""
    with tarfile.open(path, "w:" + compress) as archive:
        data = b"fine\n"
        info = tarfile.TarInfo("ok.txt")
        info.size, info.mode, info.uid = len(data), 0o4755, 4242
        archive.addfile(info, io.BytesIO(data))
        if link:
            info = tarfile.TarInfo(link)
            info.type, info.linkname = tarfile.SYMTYPE, "../config.toml"
            archive.addfile(info)
        if hard:
            info = tarfile.TarInfo(hard)
            info.type, info.linkname = tarfile.LNKTYPE, "ok.txt"
            archive.addfile(info)


TAR_REFUSED = {
    "tar -xf links.tar": "symbolic link AGENTS2.md",
    "tar -xzf links.tgz": "symbolic link AGENTS2.md",
    "tar xf hard.tar": "hard link",
    "tar -x --file=links.tar -C tmp": "symbolic link",
    "tar -x < links.tar": "symbolic link",
    "cat links.tar | tar -x": "standard input",
    "tar -xf plain.tar --transform s/ok/AGENTS/": "--transform",
    "tar -xf links.tar AGENTS2.md": "symbolic link",
}


@needs("tar")
@pytest.mark.parametrize("sandbox", SANDBOXES)
@pytest.mark.parametrize("command", sorted(TAR_REFUSED))
async def test_tar_refuses_an_archive_that_would_extract_a_link(
    world: World, sandbox: str, command: str
) -> None:
    make_tar(world.workspace / "links.tar", link="AGENTS2.md")
    make_tar(world.workspace / "links.tgz", link="AGENTS2.md", compress="gz")
    make_tar(world.workspace / "hard.tar", hard="AGENTS2.md")
    make_tar(world.workspace / "plain.tar")
    before = world.snapshot()
    result = await shell(world, command, sandbox=sandbox, owner=Owner(answer=True))
    assert result.output.startswith("Refused:") and TAR_REFUSED[command] in result.output
    assert world.snapshot() == before and world.links() == []


@needs("tar")
@pytest.mark.parametrize("sandbox", SANDBOXES)
async def test_tar_extracts_the_rest_without_owners_or_setuid(world: World, sandbox: str) -> None:
    make_tar(world.workspace / "links.tar", link="AGENTS2.md")
    run(["tar", "-xf", "links.tar", "-C", "tmp"], world.workspace)
    assert (world.workspace / "tmp" / "AGENTS2.md").is_symlink()  # the control: GNU tar links
    (world.workspace / "tmp" / "AGENTS2.md").unlink()
    result = await shell(world, "tar -xf links.tar ok.txt", sandbox=sandbox)
    assert result.output.startswith("exit code: 0"), result.output
    info = (world.workspace / "ok.txt").stat()
    assert info.st_uid == os.getuid() and not info.st_mode & stat.S_ISUID
    assert world.links() == [] and not lexists(world.workspace / "AGENTS2.md")


def make_zip(path: Path, *, link: str = "") -> None:
    with zipfile.ZipFile(path, "w") as archive:
        archive.writestr("ok.txt", "fine\n")
        if link:
            info = zipfile.ZipInfo(link)
            info.create_system, info.external_attr = 3, (stat.S_IFLNK | 0o777) << 16
            archive.writestr(info, "../config.toml")


@needs("unzip")
@pytest.mark.parametrize("sandbox", SANDBOXES)
async def test_unzip_refuses_an_archive_that_would_extract_a_link(
    world: World, sandbox: str
) -> None:
    make_zip(world.workspace / "links.zip", link="AGENTS2.md")
    control = world.root / "control"
    control.mkdir()
    run(["unzip", "-q", str(world.workspace / "links.zip")], control)
    assert os.readlink(control / "AGENTS2.md") == "../config.toml"  # unzip itself links
    before = world.snapshot()
    for command in ("unzip links.zip", "unzip -o links.zip -d tmp", "unzip links AGENTS2.md"):
        result = await shell(world, command, sandbox=sandbox, owner=Owner(answer=True))
        assert result.output.startswith("Refused:") and "symbolic link" in result.output
    assert world.snapshot() == before
    result = await shell(world, "unzip links.zip ok.txt", sandbox=sandbox)
    assert result.output.startswith("exit code: 0"), result.output
    assert_plain_file(world.workspace / "ok.txt", "fine\n")
    assert world.links() == []


@pytest.fixture
def planted(world: World) -> World:
    """Links the owner made (or an older, looser autonomy did): inside, leading out, in a
    folder; and two names of one file."""
    ws = world.workspace
    os.symlink("notes.txt", ws / "lnk")
    os.symlink(world.outside / "secret.txt", ws / "out")
    (ws / "d").mkdir()
    (ws / "d" / "file.txt").write_text("in d\n")
    os.symlink("../notes.txt", ws / "d" / "inner")
    (ws / "far").mkdir()
    os.symlink(world.outside / "secret.txt", ws / "far" / "secret")
    (ws / "h").mkdir()
    (ws / "h" / "a.txt").write_text("one file\n")
    os.link(ws / "h" / "a.txt", ws / "h" / "b.txt")
    return world


CP_MV_REFUSED = """
cp -s notes.txt s.txt
cp --symbolic-link notes.txt s.txt
cp --sym notes.txt s.txt
cp -l notes.txt h.txt
cp --link notes.txt h.txt
cp -P lnk copy
cp -d lnk copy
cp -a lnk copy
cp --no-dereference lnk copy
cp -r d d2
cp -R d d2
cp -a d d2
cp -rH d d2
cp -rLP d d2
cp -rL far f2
cp -L out x
cp -a h h2
cp -r --preserve=links h h2
mv lnk moved
mv d d3
mv d tmp
ln -s notes.txt l
ln notes.txt l
ln -s ../config.toml AGENTS.md
link notes.txt l
patch -p1 -i p.diff
patch < p.diff
cpio -i < a.cpio
bsdtar -xf a.tar
7z x a.7z
rsync -a d d2
""".strip().splitlines()


@pytest.mark.parametrize("sandbox", SANDBOXES)
@pytest.mark.parametrize("command", CP_MV_REFUSED)
async def test_link_making_commands_are_refused_even_when_approved(
    planted: World, sandbox: str, command: str
) -> None:
    (planted.workspace / "p.diff").write_text(LINK_PATCH)
    before = planted.snapshot()
    result = await shell(planted, command, sandbox=sandbox, owner=Owner(answer=True))
    assert result.output.startswith("Refused:"), result.output
    assert planted.snapshot() == before


COPIES = {  # command -> the copy it makes, a plain file holding what the link led to
    "cp lnk copy": ("copy", "buy milk\n"),
    "cp -rL d d2": ("d2/inner", "buy milk\n"),
    "cp -aL d d2": ("d2/inner", "buy milk\n"),
    "cp -r h h2": ("h2/b.txt", "one file\n"),
}


@pytest.mark.parametrize("sandbox", SANDBOXES)
@pytest.mark.parametrize(("command", "copy", "text"), [(c, *v) for c, v in COPIES.items()])
async def test_copies_follow_links_inside_and_make_none(
    planted: World, sandbox: str, command: str, copy: str, text: str
) -> None:
    links = planted.links()
    result = await shell(planted, command, sandbox=sandbox)
    assert result.output.startswith("exit code: 0"), result.output
    assert_plain_file(planted.workspace / copy, text)
    assert planted.links() == links


def test_git_and_tar_get_their_words(world: World) -> None:
    policy = policy_for(world)
    assert plan_command("git status", policy).script.startswith(
        "'git' '-c' 'core.symlinks=false' 'status'"
    )
    make_tar(world.workspace / "plain.tar")
    script = plan_command("tar -xf plain.tar -- ok.txt", policy).script
    assert "'--no-same-owner' '--no-same-permissions' '--' 'ok.txt'" in script


def test_an_archive_too_large_or_unreadable_to_check_is_refused(
    world: World, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A small archive that inflates past the budget (a bomb) and a compression this reader
    lacks are refused before anything is extracted, saying what to do instead."""
    monkeypatch.setattr(archives, "MAX_BYTES", 1024 * 1024)
    with tarfile.open(world.workspace / "bomb.tgz", "w:gz") as archive:
        info = tarfile.TarInfo("zeros")
        info.size = 8 * 1024 * 1024
        archive.addfile(info, io.BytesIO(bytes(info.size)))
    (world.workspace / "a.tar.zst").write_bytes(b"\x28\xb5\x2f\xfd" + bytes(64))
    policy = policy_for(world)
    with pytest.raises(PolicyError, match="too large to check for links"):
        plan_command("tar -xzf bomb.tgz", policy)
    with pytest.raises(PolicyError, match=r"zstd archive a\.tar\.zst cannot"):
        plan_command("tar -xf a.tar.zst", policy)
    assert plan_command("tar -tzf bomb.tgz", policy).ask == ()  # listing needs no check
