"""The shell grammar: what is parsed is static, and render_posix runs exactly that."""

from __future__ import annotations

import dataclasses
import glob
import os
import shutil
import subprocess
from pathlib import Path

import pytest

from tools.shell.grammar import (
    CommandLine,
    Pipeline,
    Redirect,
    ShellRefused,
    SimpleCommand,
    Word,
    parse_command_line,
)
from tools.shell.render import render_posix


def _word(word: Word) -> str:
    flags = ("g" if word.glob else "") + ("~" if word.tilde else "")
    return f"[{word.text}]{flags}"


def _redirect(r: Redirect) -> str:
    if r.op == "dup":
        return f"{r.fd}>&{r.dup_fd}"
    if r.heredoc is not None:
        return f"{r.fd}<<{r.heredoc!r}"
    assert r.target is not None
    return f"{r.fd}{r.op}{_word(r.target)}"


def show(line: CommandLine) -> str:
    """A compact, unambiguous picture: every word in brackets, g/~ for its flags."""
    out: list[str] = []
    for connector, pipeline in line.steps:
        if connector:
            out.append(connector)
        commands = [
            " ".join([_word(w) for w in c.argv] + [_redirect(r) for r in c.redirects])
            for c in pipeline.commands
        ]
        out.append(" | ".join(commands))
    return " ".join(out)


ACCEPTED = [
    ("simple", "ls -la", "[ls] [-la]"),
    ("pipeline", "cat a.txt | wc -l", "[cat] [a.txt] | [wc] [-l]"),
    ("and_or", "make && echo ok || echo no", "[make] && [echo] [ok] || [echo] [no]"),
    ("semicolon", "pwd; ls", "[pwd] ; [ls]"),
    ("newline_list", "pwd\nls\n", "[pwd] ; [ls]"),
    ("trailing_semicolon", "ls;", "[ls]"),
    ("blank_lines", "\n\nls\n\n\nwc\n", "[ls] ; [wc]"),
    ("newline_after_pipe", "ls |\n  wc", "[ls] | [wc]"),
    ("newline_after_and", "ls &&\nwc", "[ls] && [wc]"),
    ("line_continuation", "ls \\\n  -l", "[ls] [-l]"),
    ("single_quotes", "echo 'a b'", "[echo] [a b]"),
    ("double_quotes", 'echo "a b"', "[echo] [a b]"),
    ("semicolon_in_quotes", 'echo "A;B"', "[echo] [A;B]"),
    ("dollar_in_single_quotes", "echo '$(not run)'", "[echo] [$(not run)]"),
    ("pipe_in_quotes", "grep -E 'TODO|milk' notes.txt", "[grep] [-E] [TODO|milk] [notes.txt]"),
    ("escaped_dollar", "echo \\$HOME", "[echo] [$HOME]"),
    ("escaped_space", "cat a\\ b", "[cat] [a b]"),
    ("escaped_backslash", "echo \\\\", "[echo] [\\]"),
    ("escaped_semicolon", "find . -name x -print \\;", "[find] [.] [-name] [x] [-print] [;]"),
    ("concatenation", "echo a\"b\"'c'", "[echo] [abc]"),
    ("quote_in_quotes", 'echo "it\'s" \'say "hi"\'', '[echo] [it\'s] [say "hi"]'),
    ("escaped_quote_in_double", 'echo "a\\"b"', '[echo] [a"b]'),
    ("backslash_kept_in_double", 'echo "a\\nb"', "[echo] [a\\nb]"),
    ("close_reopen_single", "echo 'it'\\''s'", "[echo] [it's]"),
    ("newline_in_quotes", "echo 'a\nb'", "[echo] [a\nb]"),
    ("continuation_in_double", 'echo "a\\\nb"', "[echo] [ab]"),
    ("empty_words", "echo '' \"\" a''", "[echo] [] [] [a]"),
    ("dollar_at_end_of_double", 'grep "end$" f', "[grep] [end$] [f]"),
    ("lone_dollar_in_double", 'echo "$"', "[echo] [$]"),
    ("quoted_program", '"ls" -l', "[ls] [-l]"),
    ("comment", "ls # list files", "[ls]"),
    ("comment_lines", "# first\nls # x\n# y\nwc", "[ls] ; [wc]"),
    ("hash_inside_word", "echo a#b", "[echo] [a#b]"),
    ("unicode", "echo é 日本 'ü'", "[echo] [é] [日本] [ü]"),
    ("numbers", "head -n 5 -1 f", "[head] [-n] [5] [-1] [f]"),
    ("dashes", "echo -- - --x=y", "[echo] [--] [-] [--x=y]"),
    (
        "git_reflog_braces",
        "git log @{u} HEAD@{1} HEAD~1 HEAD^",
        "[git] [log] [@{u}] [HEAD@{1}] [HEAD~1] [HEAD^]",
    ),
    ("find_exec_braces", "find . -exec cat {} +", "[find] [.] [-exec] [cat] [{}] [+]"),
    ("quoted_braces", "echo '{a,b}' \\{c,d}", "[echo] [{a,b}] [{c,d}]"),
    ("equals_word", "echo a=b c=d", "[echo] [a=b] [c=d]"),
    ("glob_star", "ls *.py", "[ls] [*.py]g"),
    ("glob_question", "cat .?/config.toml", "[cat] [.?/config.toml]g"),
    ("glob_bracket", "ls a[bc]", "[ls] [a[bc]]g"),
    ("quoted_star_literal", "echo '*' \"?\" \\*", "[echo] [*] [?] [*]"),
    ("tilde", "ls ~ ~/notes", "[ls] [~]~ [~/notes]~"),
    ("tilde_glob", "ls ~/*.md", "[ls] [~/*.md]g~"),
    ("quoted_tilde", "echo '~' a~b HEAD~2", "[echo] [~] [a~b] [HEAD~2]"),
    ("redirect_in", "cat </etc/passwd", "[cat] 0<[/etc/passwd]"),
    ("redirect_in_no_space", "cat</etc/passwd", "[cat] 0<[/etc/passwd]"),
    ("redirect_out_no_space", "echo x>../y", "[echo] [x] 1>[../y]"),
    ("redirect_append", "echo x >> log", "[echo] [x] 1>>[log]"),
    ("redirect_clobber", "echo x >| log", "[echo] [x] 1>[log]"),
    ("redirect_fd", "ls 2>err 1>out 3<in", "[ls] 2>[err] 1>[out] 3<[in]"),
    ("redirect_dup", "ls 2>&1", "[ls] 2>&1"),
    ("redirect_dup_order", "ls 2>&1 >f", "[ls] 2>&1 1>[f]"),
    ("redirect_dup_default", "echo oops >&2", "[echo] [oops] 1>&2"),
    ("redirect_dup_input", "cat <&3", "[cat] 0>&3"),
    ("redirect_both", "ls &>all", "[ls] 1>[all] 2>&1"),
    ("redirect_both_append", "ls &>>all", "[ls] 1>>[all] 2>&1"),
    ("redirect_before_program", ">f echo hi", "[echo] [hi] 1>[f]"),
    ("redirect_between_args", "echo a >f b", "[echo] [a] [b] 1>[f]"),
    ("redirect_quoted_target", "echo x > 'my file'", "[echo] [x] 1>[my file]"),
    ("redirect_in_pipeline", "cat <f | sort >g", "[cat] 0<[f] | [sort] 1>[g]"),
    ("redirect_after_list", "ls && wc >f", "[ls] && [wc] 1>[f]"),
    ("redirect_middle_of_pipe", "a >f | b 2>&1 | c", "[a] 1>[f] | [b] 2>&1 | [c]"),
    ("redirect_glob_target", "cat <*.txt", "[cat] 0<[*.txt]g"),
    ("pipe_stderr", "make |& grep error", "[make] 2>&1 | [grep] [error]"),
    ("herestring", "cat <<< 'a b'", "[cat] 0<<'a b\\n'"),
    ("herestring_unquoted", "wc -c <<<hello", "[wc] [-c] 0<<'hello\\n'"),
    ("heredoc_quoted", "cat <<'EOF'\nhello $x `y`\nEOF\n", "[cat] 0<<'hello $x `y`\\n'"),
    ("heredoc_double_quoted", 'cat <<"EOF"\n$x\nEOF', "[cat] 0<<'$x\\n'"),
    ("heredoc_backslash", "cat <<\\EOF\n$x\\\nEOF\n", "[cat] 0<<'$x\\\\\\n'"),
    ("heredoc_plain", "cat <<EOF\n  two spaces\n\nEOF\n", "[cat] 0<<'  two spaces\\n\\n'"),
    ("heredoc_empty", "cat <<EOF\nEOF\n", "[cat] 0<<''"),
    ("heredoc_dash_tabs", "cat <<-EOF\n\t\tx\n\tEOF\n", "[cat] 0<<'x\\n'"),
    ("heredoc_space_delimiter", "cat <<'E F'\nx\nE F\n", "[cat] 0<<'x\\n'"),
    (
        "heredoc_to_file",
        "cat > notes.md <<'EOF'\n# Title\nEOF\n",
        "[cat] 1>[notes.md] 0<<'# Title\\n'",
    ),
    ("heredoc_then_redirects", "cat <<E 2>&1 >f\nx\nE\n", "[cat] 0<<'x\\n' 2>&1 1>[f]"),
    (
        "heredoc_in_pipeline",
        "cat <<'E' | grep x && ls\nx\nE\n",
        "[cat] 0<<'x\\n' | [grep] [x] && [ls]",
    ),
    ("heredoc_after_list", "a && b <<'E' || c\nx\nE\n", "[a] && [b] 0<<'x\\n' || [c]"),
    ("heredoc_then_more", "cat <<E\nx\nE\nls\n", "[cat] 0<<'x\\n' ; [ls]"),
    ("two_heredocs", "cat <<A\na\nA\ncat <<B\nb\nB\n", "[cat] 0<<'a\\n' ; [cat] 0<<'b\\n'"),
    ("export_is_a_program", "export A=1 B", "[export] [A=1] [B]"),
    ("declare_is_a_program", "declare -r X=y", "[declare] [-r] [X=y]"),
    ("unset_is_a_program", "unset -f x", "[unset] [-f] [x]"),
    ("test_program", "test -f x && echo yes", "[test] [-f] [x] && [echo] [yes]"),
    ("keyword_as_argument", "echo if then done", "[echo] [if] [then] [done]"),
    ("quoted_keyword_program", "'if' x", "[if] [x]"),
    ("bang_argument", "find . ! -name x", "[find] [.] [!] [-name] [x]"),
    (
        "quoted_newline_then_heredoc",
        "cat <<'E' - 'a\nb'\nbody\nE\n",
        "[cat] [-] [a\nb] 0<<'body\\n'",
    ),
]


@pytest.mark.parametrize(("line", "expected"), [pytest.param(a, b, id=i) for i, a, b in ACCEPTED])
def test_accepted_lines_and_their_structure(line: str, expected: str) -> None:
    assert show(parse_command_line(line)) == expected


REFUSED = [
    ("home_variable", "cat $HOME/../config.toml", "variable expansion"),
    ("positional", "echo $1", "variable expansion"),
    ("pid", "grep -a KEY /proc/$PPID/environ", "variable expansion"),
    ("braced_variable", "echo ${HOME}", "parameter expansion"),
    ("ifs", "cat${IFS}/etc/passwd", "parameter expansion"),
    ("variable_in_double", 'echo "$HOME"', "variable expansion"),
    ("braced_in_double", 'echo "a${x}b"', "parameter expansion"),
    ("command_substitution", "echo $(id)", "command substitution"),
    ("substitution_in_double", 'echo "$(id)"', "command substitution"),
    ("backticks", "echo `id`", "command substitution"),
    ("backticks_in_double", 'echo "`id`"', "command substitution"),
    ("arithmetic", "echo $((1+2))", "arithmetic expansion"),
    ("process_substitution_in", "diff <(ls) f", "process substitution"),
    ("process_substitution_out", "tee >(cat) f", "process substitution"),
    ("ansi_c", "echo $'\\x41'", "$'...'"),
    ("locale_string", 'echo $"x"', '$"..."'),
    ("lone_dollar", "echo a$", "$"),
    ("subshell", "(cd /; ls)", "subshell"),
    ("group", "{ ls; }", "group"),
    ("group_redirect", "{ ls; } >f", "group"),
    ("function", "f() { ls; }", "function definition"),
    ("function_keyword", "function f { ls; }", "function definition"),
    ("if", "if true; then ls; fi", "if/then/fi"),
    ("for", "for x in a; do ls; done", "for"),
    ("c_for", "for ((i=0;i<3;i++)); do ls; done", "for"),
    ("while", "while true; do ls; done", "while"),
    ("until", "until true; do ls; done", "until"),
    ("case", "case x in a) ls;; esac", "case"),
    ("select", "select x in a; do ls; done", "select"),
    ("double_brackets", "[[ -f x ]]", "test"),
    ("single_brackets", "[ -f x ]", "test -f x"),
    ("arithmetic_command", "((x=1))", "arithmetic"),
    ("brace_list", "cat {a,b}.txt", "brace expansion"),
    ("brace_range", "echo {1..3}", "brace expansion"),
    ("brace_in_word", "cp f{,.bak}", "brace expansion"),
    ("assignment_prefix", "A=1 ls", "VAR=value"),
    ("assignment_alone", "A=1", "VAR=value"),
    ("ifs_assignment", "IFS=/ cat x", "VAR=value"),
    ("background", "sleep 10 &", "background"),
    ("background_in_list", "ls & rm x", "background"),
    ("negation", "! ls", "negation"),
    ("read_write", "cat <>f", "syntax error"),
    ("close_fd", "ls 2>&-", "not supported"),
    ("big_fd", "ls 10>f", "0 to 9"),
    ("named_fd", "ls {fd}>f", "file descriptor"),
    ("fd_zero_unseen", "cat 0<f", "file descriptor"),
    ("herestring_fd_unseen", "cat 0<<<x", "file descriptor"),
    ("fd_with_both", "ls 2&>f", "file descriptor"),
    ("tree_sitter_joins_brackets", "echo [ ]", "unquoted ' '"),
    ("dup_to_word", "ls 2>&f", "not supported"),
    ("old_style_both", "ls >&all", "not supported"),
    ("dup_move", "ls 2>&1-", "not supported"),
    ("coproc", "coproc ls", "keyword 'coproc'"),
    ("time_keyword", "time ls", "keyword 'time'"),
    ("then_alone", "then ls", "keyword 'then'"),
    ("extglob", "echo @(a|b)", "syntax error"),
    ("extglob_negated", "ls !(x)", "syntax error"),
    ("unterminated_single", "echo 'abc", "syntax error"),
    ("unterminated_double", 'echo "abc', "syntax error"),
    ("dangling_and", "ls &&", "syntax error"),
    ("dangling_pipe", "ls |", "syntax error"),
    ("dangling_redirect", "echo a >", "syntax error"),
    ("double_semicolon", "ls ;; ls", "';;'"),
    ("leading_semicolon", ";ls", "syntax error"),
    ("empty", "", "empty"),
    ("blank", "  \n\t ", "empty"),
    ("only_comment", "# nothing", "empty"),
    ("only_redirect", ">f", "no command"),
    ("tilde_user", "ls ~root", "~user"),
    ("tilde_plus", "ls ~+", "~user"),
    ("tilde_minus", "cd ~-", "~user"),
    ("tilde_after_equals", "cp x --dest=~/y", "~ after ="),
    ("tilde_in_assignment_word", "echo PATH=a:~/b", "~ after"),
    ("continuation_inside_word", "echo a\\\nb", "splits"),
    ("crlf", "ls\r\n", "CRLF"),
    ("crlf_between", "ls\r\nwc\r\n", "CRLF"),
    ("nul", "echo a\x00b", "NUL"),
    ("heredoc_expands", "cat <<EOF\nhello $USER\nEOF\n", "unquoted delimiter"),
    ("heredoc_backticks", "cat <<EOF\n`id`\nEOF\n", "unquoted delimiter"),
    ("heredoc_continuation", "cat <<EOF\nx\\\nEOF\nEOF\n", "unquoted delimiter"),
    ("heredoc_backslash_unquoted", "cat <<EOF\nprint('a\\n')\nEOF\n", "unquoted delimiter"),
    ("heredoc_unterminated", "cat <<EOF\nhello", "syntax error"),
    ("heredoc_end_with_text", "cat <<EOF\nx\nEOF x\nEOF\n", "syntax error"),
    ("heredoc_then_semicolon", "cat <<A; ls\nx\nA\n", "syntax error"),
    ("two_heredocs_one_line", "cat <<A | cat <<B\na\nA\nb\nB\n", "syntax error"),
    ("two_heredocs_one_command", "cat <<A <<B\na\nA\nb\nB\n", "syntax error"),
    ("heredoc_dash_before", "cat -<<E\nr\nE\n", "operator '-<<'"),
    ("split_word_brace", "echo a{\\*", "splits"),
    ("split_word_bracket", "echo ]\\}", "splits"),
    ("newline_continuation_then_pipe", "ls\n\\\n|& wc", "did not place"),
    ("continuation_before_hash", "ls ..\\\n#x", "splits"),
    ("option_read_as_fd", "printf x -n2>&1", "file descriptor '-n2'"),
    ("heredoc_fd_zero_unseen", "cat 0<<'E'\nx\nE\n", "syntax error"),
    ("declare_array", "declare -a x=(1 2)", "unquoted '('"),
    ("redirect_alone_after_command", "ls; >f", "no command"),
    ("export_expansion", "export A=$B", "variable expansion"),
]


@pytest.mark.parametrize(("line", "reason"), [pytest.param(a, b, id=i) for i, a, b in REFUSED])
def test_refused_lines_say_why(line: str, reason: str) -> None:
    with pytest.raises(ShellRefused) as refused:
        parse_command_line(line)
    assert reason in str(refused.value)


def test_word_flags_and_glob_pattern() -> None:
    (cmd,) = parse_command_line("ls '*'x* a\"?\"[bc] ~/d*").steps[0][1].commands
    star, bracket, home = cmd.argv[1:]
    assert star == Word("*x*", glob=True, pattern="[*]x*")
    assert bracket == Word("a?[bc]", glob=True, pattern="a[?][bc]")
    assert home == Word("~/d*", glob=True, tilde=True, pattern="~/d*")
    assert parse_command_line("echo '*'").steps[0][1].commands[0].argv[1] == Word("*")


def _plain(line: CommandLine) -> CommandLine:
    """The structure with Word flags cleared: once rendered, every word is quoted."""

    def clear(word: Word) -> Word:
        return Word(word.text)

    def command(c: SimpleCommand) -> SimpleCommand:
        redirects = tuple(
            dataclasses.replace(r, target=clear(r.target) if r.target else None)
            for r in c.redirects
        )
        return SimpleCommand(tuple(clear(w) for w in c.argv), redirects)

    return CommandLine(
        tuple((conn, Pipeline(tuple(command(c) for c in p.commands))) for conn, p in line.steps)
    )


@pytest.mark.parametrize("line", [pytest.param(a, id=i) for i, a, _ in ACCEPTED])
def test_render_round_trips(line: str) -> None:
    parsed = parse_command_line(line)
    script = render_posix(parsed)
    assert parse_command_line(script) == _plain(parsed)
    assert render_posix(parse_command_line(script)) == script


def test_render_quotes_every_word() -> None:
    parsed = parse_command_line("'a=b' 'if' \"it's\" -- '' x")
    assert render_posix(parsed) == "'a=b' 'if' 'it'\"'\"'s' '--' '' 'x'\n"


def test_render_heredoc_delimiter_never_in_body() -> None:
    line = parse_command_line("cat <<'X'\nPINCLAW_EOF\nPINCLAW_EOF_\nX\n")
    script = render_posix(line)
    assert script == ("'cat' <<'PINCLAW_EOF__'\nPINCLAW_EOF\nPINCLAW_EOF_\nPINCLAW_EOF__\n")
    assert parse_command_line(script) == line


def test_render_uses_the_words_expansion() -> None:
    line = parse_command_line("ls *.py ~/x >~/out")

    def expand(word: Word) -> list[str]:
        if word.glob:
            return ["a.py", "b c.py"]
        return ["/ws" + word.text[1:]] if word.tilde else [word.text]

    assert render_posix(line, expand) == "'ls' 'a.py' 'b c.py' '/ws/x' >'/ws/out'\n"


@pytest.mark.parametrize(
    ("line", "words", "message"),
    [
        pytest.param("cat <*.txt", lambda w: ["a", "b"], "ambiguous redirect", id="ambiguous"),
        pytest.param("ls", lambda w: [], "no words", id="no_program"),
    ],
)
def test_render_refuses_what_it_cannot_express(line: str, words: object, message: str) -> None:
    with pytest.raises(ValueError, match=message):
        render_posix(parse_command_line(line), words)  # type: ignore[arg-type]


def test_hand_built_heredoc_must_end_in_newline() -> None:
    redirect = Redirect(0, "<", None, heredoc="no newline")
    line = CommandLine((("", Pipeline((SimpleCommand((Word("cat"),), (redirect,)),))),))
    with pytest.raises(ValueError, match="newline"):
        render_posix(line)


# -- running both: bash on the original, sh on the rendering --------------------------

RUN_CORPUS = [
    "printf '%s\\n' a\"b\"'c' 'd e' \"f;g\"",
    "printf '%s\\n' '$(not run)' \\$HOME 'it'\\''s'",
    "cat notes.txt | sort -r | head -n 2",
    "grep -E 'TODO|milk' notes.txt",
    "grep -c x notes.txt || echo none",
    "false && echo no; echo yes",
    "cat missing.txt 2>&1 | wc -l",
    "cat missing.txt 2>/dev/null; echo after",
    "ls missing.txt >out.txt 2>&1; cat out.txt | wc -l",
    "echo one > made.txt; echo two >> made.txt; cat made.txt",
    "ls nope |& wc -l",
    "ls nope &>both.txt; wc -l <both.txt",
    "cat <<'EOF'\nliteral $HOME `id` \\n\nEOF\n",
    "cat <<EOF | tr a-z A-Z\nsmall words\n\nEOF\n",
    "cat <<-EOF\n\tindented\n\tEOF\n",
    "tr a-z A-Z <<< 'here string'",
    "printf '%s\\n' *.txt",
    "printf '%s\\n' ~/notes.txt ~",
    "printf '%s\\n' n?tes.txt '*'.txt [n]otes.txt",
    "printf '%s\\n' 'PINCLAW_EOF' && cat <<'X'\nPINCLAW_EOF\nX\n",
    "printf '%s\\n' 'multi\nline' | wc -l",
    "printf '%s\\n' é 日本 # comment",
]


def _expand_in(cwd: Path, home: Path) -> object:
    def expand(word: Word) -> list[str]:
        text = str(home) + word.text[1:] if word.tilde else word.text
        if not word.glob or word.pattern is None:
            return [text]
        pattern = str(home) + word.pattern[1:] if word.tilde else word.pattern
        matches = sorted(glob.glob(pattern, root_dir=cwd))
        return matches or [text]

    return expand


@pytest.mark.skipif(shutil.which("bash") is None, reason="bash is not installed")
@pytest.mark.parametrize("line", RUN_CORPUS)
def test_rendering_runs_like_the_original(tmp_path: Path, line: str) -> None:
    outputs = []
    for name, argv in (("bash", ["bash", "-c", line]), ("sh", ["sh", "-c", ""])):
        cwd = tmp_path / name
        cwd.mkdir()
        (cwd / "notes.txt").write_text("buy milk\nTODO: call\nzebra\n")
        (cwd / "other.txt").write_text("x\n")
        if name == "sh":
            argv[2] = render_posix(parse_command_line(line), _expand_in(cwd, cwd))  # type: ignore[arg-type]
        env = {"PATH": os.environ["PATH"], "HOME": str(cwd), "LC_ALL": "C.UTF-8"}
        result = subprocess.run(argv, cwd=cwd, env=env, capture_output=True, timeout=10)
        files = {p.name: p.read_bytes() for p in sorted(cwd.iterdir())}
        output = result.stdout.replace(str(cwd).encode(), b"HOME")
        outputs.append((result.returncode, output, files))
    assert outputs[0] == outputs[1]
    assert outputs[0][1]  # every corpus line prints something
