"""Commands as records keep them: relative to the repository, naming no machine's paths."""

from __future__ import annotations

import os
import re
import shlex
import sys
import tempfile
from collections.abc import Sequence
from pathlib import Path

from benchmarks.harness.paths import REPO_ROOT

# Tokens a shell takes as they are; `$NAME/...` stays readable as the folder it stands for.
_PLAIN = re.compile(r"[\w@%+=:,./$~-]+")


def _roots() -> list[tuple[Path, str]]:
    """(folder, what a command shows for it), the deepest folder first: the repository's files
    are shown relative to it, the peers' venvs, temporary and home folders by name."""
    roots = [(REPO_ROOT, "")]
    if os.environ.get("PEER_ENVS"):
        roots.append((Path(os.environ["PEER_ENVS"]), "$PEER_ENVS"))
    roots.append((Path(tempfile.gettempdir()), "$TMPDIR"))
    if os.environ.get("HOME"):
        roots.append((Path(os.environ["HOME"]), "~"))
    return sorted(roots, key=lambda root: len(root[0].parts), reverse=True)


def portable_path(text: str) -> str:
    """`text` if it is not an absolute path; else the path relative to the repository, this
    interpreter as `python`, a path under $PEER_ENVS, the temporary folder or home by that name,
    and any other absolute path by its last part alone (`.../name`)."""
    if not os.path.isabs(text):
        return text
    path = Path(os.path.normpath(text))
    if path in (Path(sys.executable), Path(sys.executable).resolve()):
        return "python"
    for root, shown in _roots():
        for base in dict.fromkeys((root, root.resolve())):
            if path == base or base in path.parents:
                rel = path.relative_to(base).as_posix()
                if not shown:
                    return rel
                return shown if rel == "." else f"{shown}/{rel}"
    return f".../{path.name}"


def portable_command(argv: Sequence[str]) -> str:
    """`argv` as one shell line with every path argument (`--flag=PATH` too) made portable
    (`portable_path`): what a record keeps as the command that produced it."""
    parts = []
    for arg in argv:
        flag, eq, value = arg.partition("=")
        is_option = eq and flag.startswith("-")
        text = f"{flag}={portable_path(value)}" if is_option else portable_path(arg)
        parts.append(text if _PLAIN.fullmatch(text) else shlex.quote(text))
    return " ".join(parts)
