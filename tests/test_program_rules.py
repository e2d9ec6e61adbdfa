"""Program rules: the paths an invocation names, whether it writes, and what is refused."""

from __future__ import annotations

import shlex

import pytest

from tools.config import DEFAULT_ALLOWED_COMMANDS
from tools.shell.program_rules import (
    WRAPPERS,
    ProgramCheck,
    check_program,
    parse_git,
    parse_options,
    runs_others,
    sed_script_refusal,
)


def check(line: str) -> ProgramCheck:
    program, *args = shlex.split(line)
    return check_program(program, args)


# (id, command line, paths that must be found, words that must not count as paths, writes)
ALLOWED = [
    ("ls", "ls -la docs", {"docs"}, {"-la"}, False),
    ("ls_dotdot", "ls ..", {".."}, set(), False),
    ("cat", "cat a.txt ../b.txt", {"a.txt", "../b.txt"}, set(), False),
    ("cat_after_dashdash", "cat -- -n /etc/x", {"-n", "/etc/x"}, set(), False),
    ("head", "head -n 5 notes.md", {"notes.md"}, set(), False),
    ("tail_attached", "tail -n5 log.txt", {"log.txt"}, set(), False),
    ("wc_files0_from", "wc --files0-from=/etc/list", {"/etc/list"}, set(), False),
    ("wc_files0_from_separate", "wc --files0-from /etc/list", {"/etc/list"}, set(), False),
    ("grep_pattern_not_path", "grep -n /usr notes.txt", {"notes.txt"}, {"/usr"}, False),
    ("grep_e_then_paths", "grep -e TODO -e /x a b", {"a", "b"}, {"TODO", "/x"}, False),
    ("grep_f_file", "grep -f /etc/patterns notes", {"/etc/patterns", "notes"}, set(), False),
    ("grep_f_attached", "grep -f/etc/patterns notes", {"/etc/patterns"}, set(), False),
    ("grep_file_long", "grep --file=../p notes", {"../p", "notes"}, set(), False),
    ("grep_long_prefix", "grep --fil=../p notes", {"../p"}, set(), False),
    ("grep_recursive", "grep -rn KEY /proc/1/environ", {"/proc/1/environ"}, {"KEY"}, False),
    ("grep_context_values", "grep -A 3 -B2 -m 1 x f", {"f"}, {"3", "x"}, False),
    ("grep_pipe_pattern", "grep -E 'TODO|milk' notes.txt", {"notes.txt"}, {"TODO|milk"}, False),
    ("rg_pattern", "rg -n /etc src", {"src"}, {"/etc"}, False),
    ("rg_files", "rg --files ../other", {"../other"}, set(), False),
    ("rg_ignore_file", "rg --ignore-file /tmp/ig x .", {"/tmp/ig", "."}, set(), False),
    ("find_start_points", "find . ../x -name '*.py'", {".", "../x"}, {"*.py"}, False),
    ("find_newer", "find . -newer /etc/passwd", {"/etc/passwd"}, set(), False),
    ("find_newerxy", "find . -newermt /etc/x", {"/etc/x"}, set(), False),
    ("find_type_value", "find src -type f -maxdepth 2", {"src"}, {"f", "2"}, False),
    ("find_delete_writes", "find build -delete", {"build"}, set(), True),
    ("find_fprint", "find . -fprint /tmp/out", {"/tmp/out"}, set(), True),
    ("find_fprintf", "find . -fprintf out.txt '%p'", {"out.txt"}, {"%p"}, True),
    ("find_files0", "find -files0-from /etc/list", {"/etc/list"}, set(), False),
    ("find_unknown_word", "find . -weird /etc", {"/etc"}, set(), False),
    ("echo_text", "echo /etc/passwd ../x", set(), {"/etc/passwd", "../x"}, False),
    ("printf_text", "printf '%s\\n' /etc", set(), {"/etc"}, False),
    ("pwd", "pwd", set(), set(), False),
    ("basename", "basename /etc/passwd", set(), {"/etc/passwd"}, False),
    ("date_format", "date +%Y-%m-%d", set(), {"+%Y-%m-%d"}, False),
    ("date_file", "date -f /etc/dates", {"/etc/dates"}, set(), False),
    ("date_file_long", "date --file=/etc/dates", {"/etc/dates"}, set(), False),
    ("date_reference", "date -r notes.md", {"notes.md"}, set(), False),
    ("du_files0_from", "du --files0-from=../list -sh", {"../list"}, set(), False),
    ("du_exclude_from", "du -X /etc/x .", {"/etc/x", "."}, set(), False),
    ("df", "df -h /", {"/"}, set(), False),
    ("sort_output_writes", "sort -o out.txt in.txt", {"out.txt", "in.txt"}, set(), True),
    ("sort_output_attached", "sort -oout.txt in.txt", {"out.txt"}, set(), True),
    ("sort_output_cluster", "sort -no /tmp/o in", {"/tmp/o", "in"}, set(), True),
    ("sort_output_long", "sort --output=/tmp/o in", {"/tmp/o"}, set(), True),
    ("sort_temp_dir", "sort -T /tmp in", {"/tmp", "in"}, set(), False),
    ("sort_key", "sort -k 2 -t , in", {"in"}, {"2", ","}, False),
    ("sort_reads", "sort -r a b", {"a", "b"}, set(), False),
    ("uniq_reads", "uniq -c in.txt", {"in.txt"}, set(), False),
    ("uniq_output_writes", "uniq in.txt out.txt", {"in.txt", "out.txt"}, set(), True),
    ("uniq_skip_value", "uniq -f 1 in.txt", {"in.txt"}, set(), False),
    ("diff_files", "diff -u a b", {"a", "b"}, set(), False),
    ("diff_to_file", "diff --to-file=/etc/x a", {"/etc/x", "a"}, set(), False),
    ("diff_from_file", "diff --from-file /etc/x a", {"/etc/x", "a"}, set(), False),
    ("mkdir_writes", "mkdir -p a/b", {"a/b"}, set(), True),
    ("mkdir_mode", "mkdir -m 755 d", {"d"}, set(), True),
    ("touch_writes", "touch new.txt", {"new.txt"}, set(), True),
    ("touch_reference", "touch -r /etc/passwd x", {"/etc/passwd", "x"}, set(), True),
    ("cp_writes", "cp a b", {"a", "b"}, set(), True),
    ("cp_target_dir", "cp -t /tmp a", {"/tmp", "a"}, set(), True),
    ("cp_target_attached", "cp -t/tmp a", {"/tmp", "a"}, set(), True),
    ("cp_target_long", "cp --target-directory=/tmp a", {"/tmp"}, set(), True),
    ("cp_target_prefix", "cp --target=/tmp a", {"/tmp"}, set(), True),
    ("mv_writes", "mv a ../b", {"a", "../b"}, set(), True),
    ("mv_target_cluster", "mv -ft/tmp a", {"/tmp"}, set(), True),
    ("rm_writes", "rm -rf build", {"build"}, set(), True),
    ("rmdir_writes", "rmdir empty", {"empty"}, set(), True),
    ("ln_symlink_target", "ln -s /etc/passwd link", {"/etc/passwd", "link"}, set(), True),
    ("chmod_mode_writes", "chmod +x run.sh", {"run.sh"}, set(), True),
    ("chmod_reference", "chmod --reference=/etc/x f", {"/etc/x", "f"}, set(), True),
    ("tee_writes", "tee -a log.txt", {"log.txt"}, set(), True),
    ("cut_delimiter", "cut -d: -f1 /etc/passwd", {"/etc/passwd"}, set(), False),
    ("tr_no_paths", "tr a-z A-Z", set(), {"a-z"}, False),
    ("stat", "stat -c %s f", {"f"}, set(), False),
    ("file_magic", "file -m /etc/magic f", {"/etc/magic", "f"}, set(), False),
    ("file_compile_writes", "file -C -m magic", {"magic"}, set(), True),
    ("sed_print", "sed -n 1,5p notes.txt", {"notes.txt"}, {"1,5p"}, False),
    ("sed_substitute", "sed 's/a/b/g' f", {"f"}, {"s/a/b/g"}, False),
    ("sed_in_place", "sed -i s/a/b/ f", {"f"}, set(), True),
    ("sed_in_place_suffix", "sed -i.bak s/a/b/ f", {".bak", "f"}, set(), True),
    ("sed_in_place_suffix_dir", "sed -i/tmp/* s/a/b/ f", {"/tmp/*"}, set(), True),
    ("sed_in_place_long", "sed --in-place -e s/a/b/ f", {"f"}, set(), True),
    ("sed_expression", "sed -e p -e d f", {"f"}, {"p", "d"}, False),
    ("tar_list", "tar -tf a.tar", {"a.tar"}, set(), False),
    ("tar_create", "tar -czf out.tgz src", {"out.tgz", "src"}, set(), True),
    ("tar_old_style", "tar czf out.tgz src", {"out.tgz", "src"}, set(), True),
    ("tar_old_style_directory", "tar xfC a.tar /tmp", {"a.tar", "/tmp"}, set(), True),
    ("tar_extract_dir", "tar -xf a.tar -C ../x", {"../x", "a.tar"}, set(), True),
    ("tar_files_from", "tar -cf a.tar -T /etc/list", {"/etc/list"}, set(), True),
    ("tar_force_local", "tar --force-local -tf a:b.tar", {"a:b.tar"}, set(), False),
    ("gzip_writes", "gzip notes.txt", {"notes.txt"}, set(), True),
    ("gzip_stdout_reads", "gzip -c notes.txt", {"notes.txt"}, set(), False),
    ("gunzip_list_reads", "gunzip -l a.gz", {"a.gz"}, set(), False),
    ("zcat_reads", "zcat a.gz", {"a.gz"}, set(), False),
    ("zip_writes", "zip -r out.zip src", {"out.zip", "src"}, set(), True),
    ("unzip_writes", "unzip a.zip -d ../x", {"a.zip", "../x"}, set(), True),
    ("unzip_list_reads", "unzip -l a.zip", {"a.zip"}, set(), False),
    ("no_rule_program", "wget -O /tmp/x", {"/tmp/x"}, set(), False),
    ("no_rule_key_value", "dd if=/etc/passwd of=copy", {"/etc/passwd", "copy"}, set(), True),
    ("program_with_slash", "./tool x", {"./tool", "x"}, set(), False),
    ("curl_file_url", "curl file:///etc/passwd", {"/etc/passwd"}, set(), False),
    ("curl_file_url_encoded", "curl FILE:///%65tc/shadow", {"/etc/shadow"}, set(), False),
    ("git_status", "git status", set(), set(), False),
    ("git_log_revisions", "git log --oneline -n 5 HEAD~1", {"HEAD~1"}, set(), False),
    ("git_diff_no_index", "git diff --no-index /etc/passwd x", {"/etc/passwd", "x"}, set(), False),
    ("git_show", "git show HEAD:README.md", {"HEAD:README.md"}, set(), False),
    ("git_dir_outside", "git -C /tmp status", {"/tmp"}, set(), False),
    ("git_git_dir", "git --git-dir=../.git log", {"../.git"}, set(), False),
    ("git_work_tree", "git --work-tree /srv log", {"/srv"}, set(), False),
    ("git_grep_pattern", "git grep -n /usr src", {"src"}, {"/usr"}, False),
    ("git_blame", "git blame f.py", {"f.py"}, set(), False),
    ("git_ls_files", "git ls-files", set(), set(), False),
    ("git_rev_parse", "git rev-parse HEAD", {"HEAD"}, set(), False),
    ("git_branch_list", "git branch -a", set(), set(), False),
    ("git_branch_list_pattern", "git branch --list 'fix*'", {"fix*"}, set(), False),
    ("git_branch_create", "git branch feature", {"feature"}, set(), True),
    ("git_branch_delete", "git branch -d old", {"old"}, set(), True),
    ("git_tag_list", "git tag", set(), set(), False),
    ("git_tag_create", "git tag v1", {"v1"}, set(), True),
    ("git_tag_contains", "git tag --contains HEAD", set(), {"HEAD"}, False),
    ("git_branch_merged", "git branch --merged main -v", set(), set(), False),
    ("git_clone_file_url", "git clone file:///etc/repo x", {"/etc/repo", "x"}, set(), True),
    ("git_stash_push", "git stash", set(), set(), True),
    ("git_stash_list", "git stash list", set(), set(), False),
    ("git_remote_list", "git remote -v", set(), set(), False),
    ("git_remote_add", "git remote add o https://example.org/r", set(), set(), True),
    ("git_config_get", "git config --get user.name", {"user.name"}, set(), False),
    ("git_config_file", "git config -f /etc/gitconfig --list", {"/etc/gitconfig"}, set(), False),
    ("git_init", "git init", set(), set(), True),
    ("git_add", "git add -A", set(), set(), True),
    ("git_commit_message", "git commit -m '/etc/x is fixed'", set(), {"/etc/x is fixed"}, True),
    ("git_commit_file", "git commit -F /tmp/msg", {"/tmp/msg"}, set(), True),
    ("git_checkout", "git checkout -b topic", set(), set(), True),
    ("git_archive_output", "git archive -o /tmp/a.tar HEAD", {"/tmp/a.tar"}, set(), True),
    ("git_clone", "git clone https://example.org/r ../r", {"../r"}, set(), True),
    ("git_submodule_status", "git submodule status", set(), set(), False),
    ("git_format_patch", "git format-patch -o /tmp/p HEAD~1", {"/tmp/p"}, set(), True),
]


@pytest.mark.parametrize(
    ("line", "paths", "not_paths", "writes"),
    [pytest.param(line, p, n, w, id=i) for i, line, p, n, w in ALLOWED],
)
def test_paths_and_writes(line: str, paths: set[str], not_paths: set[str], writes: bool) -> None:
    result = check(line)
    assert result.refusal is None
    assert paths <= set(result.paths)
    assert not not_paths & set(result.paths)
    assert result.writes is writes


REFUSED = [
    ("git_config_alias", "git -c alias.x='!sh -c id' x", "git -c"),
    ("git_config_long", "git --config-env=core.pager=X log", "--config-env"),
    ("git_exec_path", "git --exec-path=/tmp status", "--exec-path"),
    ("git_exec_path_bare", "git --exec-path", "--exec-path"),
    ("git_alias", "git x", "alias"),
    ("git_unknown_command", "git frobnicate", "alias"),
    ("git_config_set", "git config core.pager 'sh -c id'", "only read"),
    ("git_config_add", "git config --add alias.x y", "only read"),
    ("git_config_edit", "git config -e", "only read"),
    ("git_config_set_subcommand", "git config set core.editor vim", "only read"),
    ("git_upload_pack", "git fetch --upload-pack='sh -c id' origin", "--upload-pack"),
    ("git_upload_pack_prefix", "git fetch --upload=x origin", "--upload-pack"),
    ("git_clone_u", "git clone -u 'sh -c id' r", "-u"),
    ("git_clone_config", "git clone -c core.hooksPath=/tmp r", "-c"),
    ("git_clone_template", "git clone --template=/tmp/t r", "hooks"),
    ("git_init_template", "git init --template /tmp/t", "hooks"),
    ("git_receive_pack", "git push --receive-pack=x origin", "--receive-pack"),
    ("git_push_exec", "git push --exec=x origin", "--exec"),
    ("git_ls_remote_upload_pack", "git ls-remote --upload-pack=x r", "--upload-pack"),
    ("git_difftool", "git difftool", "runs programs"),
    ("git_mergetool", "git mergetool", "runs programs"),
    ("git_filter_branch", "git filter-branch --tree-filter x", "runs programs"),
    ("git_submodule_foreach", "git submodule foreach id", "foreach"),
    ("git_bisect_run", "git bisect run ./test.sh", "bisect run"),
    ("git_ext_diff", "git diff --ext-diff", "--ext-diff"),
    ("git_output", "git log -p --output=/tmp/x", "--output"),
    ("git_grep_pager", "git grep -Osh TODO", "-O"),
    ("git_grep_pager_long", "git grep --open-files-in-pager=sh x", "--open-files-in-pager"),
    ("git_rebase_exec", "git rebase -x 'sh -c id' main", "-x"),
    ("git_archive_remote_exec", "git archive --exec=x --remote=r HEAD", "--exec"),
    ("git_ext_transport", "git clone 'ext::sh -c id' r", "ext::"),
    ("git_branch_editor", "git branch --edit-description", "--edit-description"),
    ("sort_compress_program", "sort --compress-program=sh a", "--compress-program"),
    ("sort_compress_prefix", "sort --compress-p=sh a", "--compress-program"),
    ("date_set", "date -s 2020-01-01", "clock"),
    ("date_set_long", "date --set=now", "clock"),
    ("date_operand_sets_clock", "date 010100002020", "clock"),
    ("find_exec", "find . -exec rm {} ;", "-exec"),
    ("find_execdir", "find . -execdir sh -c id ;", "-execdir"),
    ("find_ok", "find . -ok rm {} ;", "-ok"),
    ("find_okdir", "find . -okdir rm {} ;", "-okdir"),
    ("tar_to_command", "tar -xf a.tar --to-command=sh", "--to-command"),
    ("tar_compress_program", "tar -I 'sh -c id' -xf a.tar", "-I"),
    ("tar_compress_program_long", "tar --use-compress-program=sh -xf a", "--use-compress"),
    ("tar_checkpoint_action", "tar --checkpoint-action=exec=id -cf a .", "--checkpoint-action"),
    ("tar_rsh_command", "tar --rsh-command=/bin/sh -f h:a -t", "--rsh-command"),
    ("tar_info_script", "tar -F ./x.sh -cf a .", "-F"),
    ("tar_info_script_long", "tar --info-script=./x -cf a .", "--info-script"),
    ("tar_ambiguous_prefix", "tar --r=sh -tf a", "--r"),
    ("tar_absolute_names", "tar -xPf a.tar", "outside the target"),
    ("tar_remote_archive", "tar -tf host:a.tar", "remote shell"),
    ("tar_old_style_remote", "tar tf host:a.tar", "remote shell"),
    ("sed_e_command", "sed 1e\\ id f", "e command"),
    ("sed_e_after_address", "sed '/x/e id' f", "e command"),
    ("sed_write_command", "sed -n 'w /tmp/x' f", "w command"),
    ("sed_write_after_semicolon", "sed 'p;w /tmp/x' f", "w command"),
    ("sed_read_command", "sed 'r /etc/passwd' f", "r command"),
    ("sed_R_command", "sed '1R /etc/shadow' f", "R command"),
    ("sed_W_command", "sed 'W out' f", "W command"),
    ("sed_s_e_flag", "sed 's/.*/id/e' f", "s///e"),
    ("sed_s_w_flag", "sed 's/a/b/w /tmp/x' f", "s///"),
    ("sed_s_flags_then_w", "sed 's/a/b/gw x' f", "s///"),
    ("sed_script_file", "sed -f script.sed f", "script file"),
    ("sed_expression_e", "sed -e p -e '$e id' f", "e command"),
    ("sed_in_block", "sed '/a/{p;e id\n}' f", "e command"),
    ("sed_unknown_command", "sed 'k' f", "not one this check knows"),
    ("rg_pre", "rg --pre=./x.sh pattern", "--pre"),
    ("rg_hostname_bin", "rg --hostname-bin=sh x", "--hostname-bin"),
    ("zip_unzip_command", "zip -T -TT 'sh -c id' a.zip f", "-TT"),
    ("zip_unzip_command_long", "zip --unzip-command=sh a.zip f", "--unzip-command"),
    ("sdiff_program", "sdiff --diff-program=sh a b", "--diff-program"),
    ("diff3_program_prefix", "diff3 --diff-p=sh a b c", "--diff-program"),
    ("sqlite_shell", "sqlite3 db '.shell id'", "runs other programs"),
    ("less_shell_escape", "less notes.txt", "interactive"),
    ("more", "more notes.txt", "interactive"),
    ("vim", "vim notes.txt", "interactive"),
    ("man", "man ls", "interactive"),
    ("versioned_python", "python3.11 -c 'import os'", "runs other programs"),
    ("env", "env PATH=/tmp ls", "runs other programs"),
    ("xargs", "xargs rm", "runs other programs"),
    ("awk", "awk 'BEGIN{system(\"id\")}'", "runs other programs"),
    ("sh", "sh -c id", "runs other programs"),
    ("wrapper_by_path", "/usr/bin/env ls", "runs other programs"),
]


@pytest.mark.parametrize(("line", "reason"), [pytest.param(a, b, id=i) for i, a, b in REFUSED])
def test_refusals_say_why(line: str, reason: str) -> None:
    refusal = check(line).refusal
    assert refusal is not None and reason in refusal


@pytest.mark.parametrize(
    "program",
    ["env", "xargs", "nice", "nohup", "timeout", "sudo", "doas", "su", "stdbuf", "time",
     "watch", "chroot", "setsid", "flock", "ionice", "taskset", "sh", "bash", "dash", "zsh",
     "python", "python3", "perl", "ruby", "node", "awk", "gawk", "mawk", "busybox"],
)  # fmt: skip
def test_wrappers_named_in_the_brief(program: str) -> None:
    assert program in WRAPPERS
    assert check_program(program, ["ls"]).refusal is not None


@pytest.mark.parametrize("program", DEFAULT_ALLOWED_COMMANDS)
def test_default_commands_are_not_refused_plainly(program: str) -> None:
    args = {"git": ["status"], "date": ["+%F"]}.get(program, ["notes.txt"])
    result = check_program(program, args)
    assert result.refusal is None
    assert result.writes is (program in ("mkdir", "touch", "cp", "mv"))


@pytest.mark.parametrize(
    "script",
    ["p", "1,5p", "$d", "/x/d", "/a/,/b/p", "1~2p", "0,/re/d", "\\%x%p", "s/a/b/", "s|/|-|g",
     "s/a\\/e/b/g", "s/e/w/2", "s/x/y/I;p", "y/abc/xyz/", "2q", "q5", "=", "$!N", "l 40",
     "a\\\nappended text w e", "i inserted ; w x", "c changed", ":top;n;b top", "/x/!d",
     "{p;d}", "#n comment w x\np", "s/a/b/;s/c/d/M", "/r/b", "T", "h;G;x"],
)  # fmt: skip
def test_harmless_sed_scripts_pass(script: str) -> None:
    assert sed_script_refusal(script) is None


@pytest.mark.parametrize(
    "script",
    ["e id", "1e id", "s/a/b/e", "s/a/b/gpe", "w out", "/x/w out", "r /etc/passwd", "1R f",
     "W f", "s/a/b/w f", "p;e", "{e id\n}", "s/a/b", "y/ab/", "s", "1,", "z;k", "1!e id"],
)  # fmt: skip
def test_dangerous_or_unclear_sed_scripts_refused(script: str) -> None:
    assert sed_script_refusal(script) is not None


def test_paths_have_no_duplicates_or_empties() -> None:
    result = check_program("cat", ["a", "a", "", "b"])
    assert result.paths == ("a", "b")


def test_outputs_and_whether_the_rules_know_the_program() -> None:
    assert check("sort -o out.txt in.txt").outputs == ("out.txt",)
    assert check("uniq in.txt out.txt").outputs == ("out.txt",)
    assert check("find . -fprint found.txt").outputs == ("found.txt",)
    assert check("cat a").known and check("cp a b").known and check("git status").known
    assert not check("curl -o x https://example.org").known  # no rule: it may write anything


def test_git_keeps_the_commands_own_double_dash() -> None:
    assert parse_git(["-C", "sub", "checkout", "--", "-n"]) == (
        [("-C", "sub")],
        "checkout",
        ["--", "-n"],
    )
    assert "-n" in check("git checkout -- -n").paths  # after --: a path, checked as one


def test_parse_options_reads_a_spec_and_a_programs_own_rule() -> None:
    parsed = parse_options("cp", ["-at", "dir", "--sym", "a"], "-t --symbolic-link.")
    assert parsed.options == [("-a", None), ("-t", "dir"), ("--symbolic-link", None)]
    assert parsed.operands == ["a"]
    assert parse_options("tar", ["xzf", "a.tgz"]).used("-x", "-z")
    assert runs_others("python3.12") and runs_others("xargs") and not runs_others("cat")
