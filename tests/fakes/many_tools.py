"""Fifty deferrable tools shaped like an MCP server's: `NAME__tool` names, a description of a
sentence or three, and JSON schemas with several described properties, modelled on what the
GitHub, filesystem, git and time servers offer (our own wording). For the deferred-schema
tests and bench/tool_schemas.py; each call is recorded and answered with its arguments."""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from typing import Any

from tools.base import ToolCallContext, ToolResult

Prop = tuple[str, str]  # (JSON type, or "objects" for an array of objects; description)

_OWNER: Prop = ("string", "Account or organisation that owns the repository")
_REPO: Prop = ("string", "Name of the repository, without the owner")
_NUMBER: Prop = ("integer", "Number of the issue or pull request")
_PAGE: Prop = ("integer", "Page of results to return, starting at 1")
_PER_PAGE: Prop = ("integer", "Results per page, at most 100")
_PATH: Prop = ("string", "Path of the file or folder, inside the allowed directories")
_REPO_PATH: Prop = ("string", "Path to the git repository on this machine")

# server, tool, description, properties, required
SPECS: list[tuple[str, str, str, dict[str, Prop], tuple[str, ...]]] = [
    ("github", "create_issue", "Open a new issue in a GitHub repository. Labels and assignees "
     "must already exist in the repository.", {"owner": _OWNER, "repo": _REPO,
     "title": ("string", "Title of the issue"), "body": ("string", "Text of the issue, in "
     "Markdown"), "labels": ("array", "Labels to put on the issue"), "assignees": ("array",
     "Logins of the people to assign")}, ("owner", "repo", "title")),
    ("github", "list_issues", "List the issues of a repository, newest first, with filters for "
     "state, labels and a date.", {"owner": _OWNER, "repo": _REPO, "state": ("string",
     "open, closed or all"), "labels": ("array", "Only issues with all of these labels"),
     "since": ("string", "Only issues updated after this ISO 8601 time"), "page": _PAGE,
     "per_page": _PER_PAGE}, ("owner", "repo")),
    ("github", "get_issue", "Read one issue of a repository with its body, labels and state.",
     {"owner": _OWNER, "repo": _REPO, "issue_number": _NUMBER}, ("owner", "repo", "issue_number")),
    ("github", "update_issue", "Change an existing issue: its title, body, state, labels or "
     "assignees.", {"owner": _OWNER, "repo": _REPO, "issue_number": _NUMBER, "title": ("string",
     "New title"), "body": ("string", "New body"), "state": ("string", "open or closed"),
     "labels": ("array", "The labels it should have"), "assignees": ("array", "The people it "
     "should be assigned to")}, ("owner", "repo", "issue_number")),
    ("github", "add_issue_comment", "Write a comment on an issue or a pull request.",
     {"owner": _OWNER, "repo": _REPO, "issue_number": _NUMBER, "body": ("string",
     "Text of the comment, in Markdown")}, ("owner", "repo", "issue_number", "body")),
    ("github", "search_issues", "Search issues and pull requests across GitHub with the "
     "GitHub search syntax.", {"q": ("string", "Search query, e.g. 'repo:o/r is:open label:bug'"),
     "sort": ("string", "comments, reactions, created or updated"), "order": ("string",
     "asc or desc"), "page": _PAGE, "per_page": _PER_PAGE}, ("q",)),
    ("github", "create_pull_request", "Open a pull request that merges one branch into "
     "another.", {"owner": _OWNER, "repo": _REPO, "title": ("string", "Title of the pull "
     "request"), "body": ("string", "Description, in Markdown"), "head": ("string", "Branch "
     "with the changes"), "base": ("string", "Branch to merge into"), "draft": ("boolean",
     "Open it as a draft")}, ("owner", "repo", "title", "head", "base")),
    ("github", "list_pull_requests", "List the pull requests of a repository with filters for "
     "state and branches.", {"owner": _OWNER, "repo": _REPO, "state": ("string", "open, closed "
     "or all"), "head": ("string", "Only from this user:branch"), "base": ("string", "Only into "
     "this branch"), "page": _PAGE, "per_page": _PER_PAGE}, ("owner", "repo")),
    ("github", "get_pull_request", "Read one pull request with its branches, state and "
     "mergeability.", {"owner": _OWNER, "repo": _REPO, "pull_number": _NUMBER},
     ("owner", "repo", "pull_number")),
    ("github", "merge_pull_request", "Merge a pull request with a merge commit, a squash or a "
     "rebase.", {"owner": _OWNER, "repo": _REPO, "pull_number": _NUMBER, "commit_title":
     ("string", "Title of the merge commit"), "merge_method": ("string", "merge, squash or "
     "rebase")}, ("owner", "repo", "pull_number")),
    ("github", "get_pull_request_files", "List the files a pull request changes, with their "
     "additions and deletions.", {"owner": _OWNER, "repo": _REPO, "pull_number": _NUMBER},
     ("owner", "repo", "pull_number")),
    ("github", "get_pull_request_status", "Read the combined status of the checks on a pull "
     "request's head commit.", {"owner": _OWNER, "repo": _REPO, "pull_number": _NUMBER},
     ("owner", "repo", "pull_number")),
    ("github", "update_pull_request_branch", "Bring a pull request's branch up to date with "
     "its base branch.", {"owner": _OWNER, "repo": _REPO, "pull_number": _NUMBER,
     "expected_head_sha": ("string", "The head commit the branch must still have")},
     ("owner", "repo", "pull_number")),
    ("github", "get_pull_request_comments", "Read the review comments on a pull request.",
     {"owner": _OWNER, "repo": _REPO, "pull_number": _NUMBER}, ("owner", "repo", "pull_number")),
    ("github", "get_pull_request_reviews", "Read the reviews of a pull request and their "
     "verdicts.", {"owner": _OWNER, "repo": _REPO, "pull_number": _NUMBER},
     ("owner", "repo", "pull_number")),
    ("github", "create_pull_request_review", "Review a pull request: approve it, ask for "
     "changes or comment, optionally on given lines.", {"owner": _OWNER, "repo": _REPO,
     "pull_number": _NUMBER, "body": ("string", "Text of the review"), "event": ("string",
     "APPROVE, REQUEST_CHANGES or COMMENT"), "comments": ("objects", "Comments on lines, each "
     "with path, line and body")}, ("owner", "repo", "pull_number", "event")),
    ("github", "search_repositories", "Search GitHub for repositories by name, topic or "
     "language.", {"query": ("string", "Search query in GitHub's syntax"), "page": _PAGE,
     "per_page": _PER_PAGE}, ("query",)),
    ("github", "create_repository", "Create a new repository in your account.", {"name":
     ("string", "Name of the repository"), "description": ("string", "One line about it"),
     "private": ("boolean", "Whether only you can see it"), "auto_init": ("boolean", "Start it "
     "with a README")}, ("name",)),
    ("github", "fork_repository", "Fork a repository into your account or an organisation.",
     {"owner": _OWNER, "repo": _REPO, "organization": ("string", "Organisation to fork into; "
     "your account when empty")}, ("owner", "repo")),
    ("github", "create_branch", "Create a branch in a repository from another branch.",
     {"owner": _OWNER, "repo": _REPO, "branch": ("string", "Name of the new branch"),
     "from_branch": ("string", "Branch to start from; the default branch when empty")},
     ("owner", "repo", "branch")),
    ("github", "list_commits", "List the commits of a branch, newest first.", {"owner": _OWNER,
     "repo": _REPO, "sha": ("string", "Branch name or commit to start from"), "page": _PAGE,
     "per_page": _PER_PAGE}, ("owner", "repo")),
    ("github", "get_file_contents", "Read a file or list a folder of a repository at a branch "
     "or commit.", {"owner": _OWNER, "repo": _REPO, "path": ("string", "Path inside the "
     "repository"), "branch": ("string", "Branch or commit; the default branch when empty")},
     ("owner", "repo", "path")),
    ("github", "create_or_update_file", "Create a file in a repository or replace its "
     "contents, as one commit.", {"owner": _OWNER, "repo": _REPO, "path": ("string", "Path "
     "inside the repository"), "content": ("string", "The file's new contents"), "message":
     ("string", "Commit message"), "branch": ("string", "Branch to commit to"), "sha":
     ("string", "Blob SHA of the file being replaced, when it exists")},
     ("owner", "repo", "path", "content", "message", "branch")),
    ("github", "push_files", "Commit several files to a branch at once.", {"owner": _OWNER,
     "repo": _REPO, "branch": ("string", "Branch to push to"), "files": ("objects", "Files, each "
     "with path and content"), "message": ("string", "Commit message")},
     ("owner", "repo", "branch", "files", "message")),
    ("github", "search_code", "Search code across GitHub repositories.", {"q": ("string",
     "Search query, e.g. 'addClass in:file language:js'"), "page": _PAGE, "per_page":
     _PER_PAGE}, ("q",)),
    ("github", "search_users", "Search GitHub users by name, login or location.", {"q":
     ("string", "Search query in GitHub's syntax"), "page": _PAGE, "per_page": _PER_PAGE},
     ("q",)),
    ("filesystem", "read_text_file", "Read the whole contents of a text file. Use head or tail "
     "for the first or last lines only. Only works within allowed directories.", {"path":
     _PATH, "head": ("integer", "Return only the first N lines"), "tail": ("integer", "Return "
     "only the last N lines")}, ("path",)),
    ("filesystem", "read_multiple_files", "Read several files at once; a file that cannot be "
     "read is reported without stopping the others.", {"paths": ("array", "Paths of the files "
     "to read")}, ("paths",)),
    ("filesystem", "write_file", "Create a file or overwrite it completely. Use with care: "
     "nothing of the old contents is kept.", {"path": _PATH, "content": ("string", "The "
     "file's contents")}, ("path", "content")),
    ("filesystem", "edit_file", "Replace exact runs of text in a file and return a diff of "
     "the change.", {"path": _PATH, "edits": ("objects", "Edits, each with oldText and newText"),
     "dryRun": ("boolean", "Show the diff without writing")}, ("path", "edits")),
    ("filesystem", "create_directory", "Create a folder, with any missing parents; a folder "
     "that exists is left as it is.", {"path": _PATH}, ("path",)),
    ("filesystem", "list_directory", "List the entries of a folder, each marked as a file or "
     "a folder.", {"path": _PATH}, ("path",)),
    ("filesystem", "directory_tree", "The tree of a folder as JSON, with the files and "
     "folders under it.", {"path": _PATH, "excludePatterns": ("array", "Glob patterns to "
     "leave out")}, ("path",)),
    ("filesystem", "move_file", "Move or rename a file or a folder; fails when the target "
     "exists.", {"source": ("string", "Where it is now"), "destination": ("string", "Where it "
     "should be")}, ("source", "destination")),
    ("filesystem", "search_files", "Find files and folders whose names match a glob pattern, "
     "under a folder.", {"path": _PATH, "pattern": ("string", "Glob pattern, e.g. '*.md'"),
     "excludePatterns": ("array", "Glob patterns to leave out")}, ("path", "pattern")),
    ("filesystem", "get_file_info", "Size, times, type and permissions of a file or folder.",
     {"path": _PATH}, ("path",)),
    ("filesystem", "list_allowed_directories", "The directories this server may read and "
     "write.", {}, ()),
    ("git", "git_status", "Show the working tree status of a repository.", {"repo_path":
     _REPO_PATH}, ("repo_path",)),
    ("git", "git_diff_unstaged", "Show the changes in the working tree not yet staged.",
     {"repo_path": _REPO_PATH, "context_lines": ("integer", "Lines of context around each "
     "change")}, ("repo_path",)),
    ("git", "git_diff_staged", "Show the changes staged for the next commit.", {"repo_path":
     _REPO_PATH, "context_lines": ("integer", "Lines of context around each change")},
     ("repo_path",)),
    ("git", "git_diff", "Show the differences between the working tree and a branch or "
     "commit.", {"repo_path": _REPO_PATH, "target": ("string", "Branch or commit to compare "
     "with"), "context_lines": ("integer", "Lines of context around each change")},
     ("repo_path", "target")),
    ("git", "git_commit", "Record the staged changes as a commit.", {"repo_path": _REPO_PATH,
     "message": ("string", "Commit message")}, ("repo_path", "message")),
    ("git", "git_add", "Stage files for the next commit.", {"repo_path": _REPO_PATH, "files":
     ("array", "Paths of the files to stage")}, ("repo_path", "files")),
    ("git", "git_reset", "Unstage every staged change.", {"repo_path": _REPO_PATH},
     ("repo_path",)),
    ("git", "git_log", "Show the commit log, newest first.", {"repo_path": _REPO_PATH,
     "max_count": ("integer", "How many commits to show")}, ("repo_path",)),
    ("git", "git_create_branch", "Create a new branch from the current one or a given start.",
     {"repo_path": _REPO_PATH, "branch_name": ("string", "Name of the new branch"),
     "base_branch": ("string", "Where to start it; the current branch when empty")},
     ("repo_path", "branch_name")),
    ("git", "git_checkout", "Switch to another branch.", {"repo_path": _REPO_PATH,
     "branch_name": ("string", "Branch to switch to")}, ("repo_path", "branch_name")),
    ("git", "git_show", "Show the contents and message of a commit.", {"repo_path": _REPO_PATH,
     "revision": ("string", "Commit, branch or tag")}, ("repo_path", "revision")),
    ("time", "get_current_time", "The current time in a time zone.", {"timezone": ("string",
     "IANA time zone name, e.g. 'Europe/Berlin'")}, ("timezone",)),
    ("time", "convert_time", "Convert a time of day from one time zone to another.",
     {"source_timezone": ("string", "IANA zone the time is in"), "time": ("string", "Time in "
     "24-hour HH:MM"), "target_timezone": ("string", "IANA zone to convert to")},
     ("source_timezone", "time", "target_timezone")),
]  # fmt: skip


@dataclass
class McpLikeTool:
    """One tool as an MCP client registers it: deferrable, its server's schema as given."""

    name: str
    description: str
    parameters: dict[str, Any]
    calls: list[dict[str, Any]] = field(default_factory=list)
    deferrable: bool = True

    async def run(self, args: dict[str, Any], call: ToolCallContext) -> ToolResult:
        self.calls.append(args)
        return ToolResult.success(f"{self.name} ran with {json.dumps(args, sort_keys=True)}")


def _property(kind: str, description: str) -> dict[str, Any]:
    if kind == "objects":
        return {"type": "array", "items": {"type": "object"}, "description": description}
    if kind == "array":
        return {"type": "array", "items": {"type": "string"}, "description": description}
    return {"type": kind, "description": description}


def many_tools(count: int = 50) -> list[McpLikeTool]:
    """The first `count` tools of SPECS (at most 50), each a fresh object."""
    found = []
    for server, tool, description, props, required in SPECS[:count]:
        properties = {key: _property(kind, text) for key, (kind, text) in props.items()}
        schema = {"type": "object", "properties": properties, "required": list(required)}
        found.append(McpLikeTool(f"{server}__{tool}", description, schema))
    return found
