"""Overwrites ask under supervised, whatever the shell means; identity files ask each time,
and "Always allow" never covers them; under full the forbidden paths are refused by the
parser too. Asserted on the disk: a denied command leaves every file byte for byte as it
was, and the question named the file."""

from __future__ import annotations

import io
import os
import tarfile
import zipfile

import pytest
from attack_world import SANDBOXES, Buttons, Owner, World, git, needs_sandbox, policy_for, shell
from attack_world import world as world  # the fixture

from agent.app import open_store
from agent.durable.always_allowed import AlwaysAllowed
from agent.runtime.approvals import chat_approver
from channels.base import ChatRef
from tools.base import ASK_EACH_TIME, ApprovalRequest, ToolCallContext
from tools.config import SecuritySettings, ShellSettings
from tools.policy import SecurityPolicy
from tools.sandbox.sandboxes import choose_sandbox
from tools.shell.plan import plan_command
from tools.shell.shell_tool import ShellTool

pytestmark = needs_sandbox
NOTES_PATCH = """\
--- a/notes.txt
+++ b/notes.txt
@@ -1 +1 @@
-buy milk
+buy beer
"""
SOUL_PATCH = NOTES_PATCH.replace("notes.txt", "SOUL.md").replace("buy milk", "calm and kind")


@pytest.fixture
def props(world: World) -> World:
    """Archives, a patch and a folder whose contents land on the workspace's files, and the
    workspace as a git repository with notes.txt and SOUL.md changed since the commit."""
    ws = world.workspace
    for name, members in (("n", ["notes.txt"]), ("soul", ["SOUL.md", "skills/evil/SKILL.md"])):
        with tarfile.open(ws / f"{name}.tar", "w") as archive:
            for member in members:
                info = tarfile.TarInfo(member)
                info.size = 6
                archive.addfile(info, io.BytesIO(b"pwned\n"))
        with zipfile.ZipFile(ws / f"{name}.zip", "w") as archive:
            for member in members:
                archive.writestr(member, "pwned\n")
    (ws / "p.diff").write_text(NOTES_PATCH)
    (ws / "soul.diff").write_text(SOUL_PATCH)
    (ws / "pack").mkdir()
    (ws / "pack" / "notes.txt").write_text("pwned\n")
    (ws / "pack" / "AGENTS.md").write_text("pwned\n")
    os.link(ws / "SOUL.md", ws / "soul-link.md")  # a second name of SOUL.md, made earlier
    git(ws, "init", "-q")
    git(ws, "add", "-A")
    git(ws, "commit", "-qm", "base")
    (ws / "notes.txt").write_text("buy milk\n(edited)\n")
    (ws / "SOUL.md").write_text("calm and kind\n(edited)\n")
    return world


# command -> a word the question must hold (the file, or what the whole tree is)
OVERWRITES = {
    "echo x > notes.txt": "> overwrites the existing file notes.txt",
    "cp new.txt notes.txt": "cp overwrites the existing file notes.txt",
    "cp -r pack/. .": "cp overwrites the existing files notes.txt, AGENTS.md",
    "mv new.txt notes.txt": "mv overwrites the existing file notes.txt",
    "mv notes.txt moved.txt": "mv moves notes.txt away",
    "rm notes.txt": "rm deletes notes.txt",
    "rm -r pack": "rm deletes pack/",
    "tee notes.txt < new.txt": "tee overwrites the existing file notes.txt",
    "sed -i s/milk/beer/ notes.txt": "sed overwrites the existing file notes.txt",
    "truncate -s 0 notes.txt": "truncate overwrites the existing file notes.txt",
    "dd if=new.txt of=notes.txt": "dd overwrites the existing file notes.txt",
    "sort -o notes.txt new.txt": "sort overwrites the existing file notes.txt",
    "tar -xf n.tar": "tar overwrites the existing file notes.txt",
    "unzip -o n.zip": "unzip overwrites the existing file notes.txt",
    "gzip notes.txt": "gzip may overwrite or delete notes.txt",
    "zip -m n2.zip notes.txt": "zip deletes notes.txt",
    "find . -name notes.txt -delete": "find -delete deletes ./",
    "git checkout -- notes.txt": "git checkout may overwrite or delete notes.txt",
    "git restore notes.txt": "git restore may overwrite or delete notes.txt",
    "git apply -R p.diff": "git apply may overwrite or delete notes.txt",
    "git rm -f notes.txt": "git rm deletes notes.txt",
    "git mv notes.txt n.txt": "git mv moves notes.txt away",
    "git reset --hard": "git reset may overwrite or delete files in ./",
    "git stash": "git stash may overwrite or delete files in ./",
    "git clean -fd": "git clean deletes ./",
}


@pytest.mark.parametrize("sandbox", SANDBOXES)
@pytest.mark.parametrize("command", sorted(OVERWRITES))
async def test_a_denied_overwrite_asks_names_the_file_and_changes_nothing(
    props: World, sandbox: str, command: str
) -> None:
    before = props.snapshot()
    owner = Owner(answer=False)
    result = await shell(props, command, sandbox=sandbox, owner=owner)
    assert result.output.startswith("Not run: the owner did not approve"), result.output
    assert len(owner.asked) == 1 and OVERWRITES[command] in owner.reasons, owner.reasons
    assert props.snapshot() == before


NO_ASK = """
cp new.txt tmp/draft.txt
echo x > tmp/draft.txt
rm tmp/draft.txt
rm -r tmp
mv tmp/draft.txt tmp/d2.txt
touch notes.txt
cp notes.txt fresh.txt
echo x >> notes.txt
tee -a notes.txt < new.txt
mkdir newdir
sed -n p notes.txt
git status --short
git apply --stat p.diff
""".strip().splitlines()


@pytest.mark.parametrize("command", NO_ASK)
async def test_new_files_scratch_and_appends_run_without_asking(props: World, command: str) -> None:
    owner = Owner(answer=False)
    result = await shell(props, command, owner=owner)
    assert result.output.startswith("exit code: 0"), result.output
    assert owner.asked == []


IDENTITY = {  # command -> the identity file it would change
    "echo x > SOUL.md": "SOUL.md",
    "echo x >> SOUL.md": "SOUL.md",
    "cp new.txt SOUL.md": "SOUL.md",
    "cp -r pack/. .": "AGENTS.md",
    "mv new.txt SOUL.md": "SOUL.md",
    "mv SOUL.md soul.txt": "SOUL.md",
    "rm SOUL.md": "SOUL.md",
    "tee SOUL.md < new.txt": "SOUL.md",
    "tee -a AGENTS.md < new.txt": "AGENTS.md",
    "sed -i s/calm/cold/ SOUL.md": "SOUL.md",
    "truncate -s 0 SOUL.md": "SOUL.md",
    "dd if=new.txt of=SOUL.md": "SOUL.md",
    "chmod 000 SOUL.md": "SOUL.md",
    "touch BOOTSTRAP.md": "BOOTSTRAP.md",
    "mkdir -p skills/evil": "skills/evil",
    "tar -xf soul.tar": "SOUL.md",
    "unzip soul.zip": "skills/evil/SKILL.md",
    "git apply -R soul.diff": "SOUL.md",
    "git checkout -- SOUL.md": "SOUL.md",
    "git checkout HEAD~0 .": "identity files",
    "git reset --hard": "identity files",
    "echo x > soul-link.md": "soul-link.md (a hard link to SOUL.md)",
}


@pytest.mark.parametrize("command", sorted(IDENTITY))
async def test_an_identity_file_asks_each_time_and_a_denial_changes_nothing(
    props: World, command: str
) -> None:
    before = props.snapshot()
    owner = Owner(answer=False)
    result = await shell(props, command, owner=owner)
    assert result.output.startswith("Not run: the owner did not approve"), result.output
    [request] = owner.asked
    assert IDENTITY[command] in request.reason
    assert any(rule.startswith(ASK_EACH_TIME) for rule in request.rules)
    assert "asked each time" in request.reason
    assert props.snapshot() == before


ALWAYS_TRIED = """
cp new.txt SOUL.md
echo x > SOUL.md
sed -i s/a/b/ SOUL.md
tee SOUL.md < new.txt
rm -f SOUL.md
git checkout -- SOUL.md
""".strip().splitlines()


@pytest.mark.parametrize("command", ALWAYS_TRIED)
async def test_always_allow_never_covers_an_identity_file(props: World, command: str) -> None:
    always = AlwaysAllowed((await open_store(props.root / "state.db")).db, props.workspace)
    buttons = Buttons()
    chat = ChatRef("telegram", "42")
    approve = chat_approver(buttons, chat, lambda *_: True, always=always, timeout_s=5)  # type: ignore[arg-type]
    policy = policy_for(props)
    tool = ShellTool(policy, ShellSettings(), choose_sandbox(SANDBOXES[0]))  # type: ignore[arg-type]
    call = ToolCallContext(props.workspace, approve=approve, owner_private=True)
    for _ in range(2):
        await tool.run({"command": command}, call)
        (props.workspace / "SOUL.md").write_text("calm and kind\n")  # back, for the next try
    assert len(buttons.questions) == 2 and all("SOUL.md" in q for q in buttons.questions)
    assert not any(rule.startswith(ASK_EACH_TIME) for rule in await always.rules())
    for _ in range(2):  # the control: an ordinary overwrite is remembered after one "always"
        await tool.run({"command": "dd if=new.txt of=notes.txt"}, call)
    assert len(buttons.questions) == 3 and "shell:overwrite:dd" in await always.rules()


def test_always_allow_says_what_it_covers_before_it_is_pressed(world: World) -> None:
    plan = plan_command("cp new.txt SOUL.md", policy_for(world))
    assert plan.rules == ("each-time:SOUL.md", "shell:overwrite:cp")
    assert plan.ask == (
        "cp changes SOUL.md, read into every chat's prompt (asked each time)",
        "cp overwrites the existing file SOUL.md",
    )
    assert "cp replacing existing files outside tmp/ and scratch/" in plan.covers
    assert "never a change to an identity file" in plan.covers
    rm = plan_command("rm notes.txt", policy_for(world))
    assert rm.rules == ("shell:rm",) and "deleting existing files outside tmp/" in rm.covers
    assert ApprovalRequest("shell", "ls", "why", ()).always_covers == ""


@pytest.mark.parametrize("command", ["echo x > SOUL.md", "cp new.txt SOUL.md", "git apply x"])
async def test_read_only_writes_no_identity_file(world: World, command: str) -> None:
    before = world.snapshot()
    result = await shell(world, command, owner=Owner(answer=True), autonomy="read_only")
    assert result.output.startswith("Refused:"), result.output
    assert world.snapshot() == before


FORBIDDEN_UNDER_FULL = """
cat /etc/passwd
cat ~root/.bashrc
date -f /etc/passwd
grep x /etc/hostname
cat /var/log/x
ls /boot
cat ../config.toml
sh -c 'cat /etc/passwd'
cat $(echo notes.txt) /etc/passwd
cat /e*/passwd
cd /etc && cat passwd
""".strip().splitlines()
STILL_RUN_UNDER_FULL = {  # command -> what its output holds
    "python3 -c 'print(1)'": "1",
    "ls /usr/bin | head -1": "",
    "echo $(date +%Y)": "20",
    "cat notes.txt | wc -l": "1",
    "ls /usr/share > /dev/null && echo ok": "ok",
    "for w in a b; do echo $w; done": "a\nb",
    "head -c 4 /dev/zero | wc -c": "4",
}


def full_policy(world: World) -> SecurityPolicy:
    """Full autonomy with the default forbidden paths (/etc, /root, /var, /boot …)."""
    settings = SecuritySettings(autonomy="full")
    return SecurityPolicy.from_settings(settings, world.workspace, home=world.home)


async def run_full(world: World, sandbox: str, command: str) -> str:
    tool = ShellTool(full_policy(world), ShellSettings(), choose_sandbox(sandbox))  # type: ignore[arg-type]
    call = ToolCallContext(world.workspace, owner_private=True)
    return (await tool.run({"command": command}, call)).output


@pytest.mark.parametrize("sandbox", SANDBOXES)
@pytest.mark.parametrize("command", FORBIDDEN_UNDER_FULL)
async def test_full_refuses_the_forbidden_paths_it_can_read(
    world: World, sandbox: str, command: str
) -> None:
    output = await run_full(world, sandbox, command)
    assert output.startswith("Refused:") and "is inside the forbidden path" in output, output


@pytest.mark.parametrize("sandbox", SANDBOXES)
@pytest.mark.parametrize("command", sorted(STILL_RUN_UNDER_FULL))
async def test_full_still_runs_the_text_as_written(
    world: World, sandbox: str, command: str
) -> None:
    output = await run_full(world, sandbox, command)
    assert output.startswith("exit code: 0") and STILL_RUN_UNDER_FULL[command] in output, output
