"""Commands as records keep them: relative to the repository, naming no machine's paths."""

from __future__ import annotations

import os
import re
import shlex
import sys
import tempfile
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from benchmarks.harness.paths import REPO_ROOT

# Tokens a shell takes as they are; `$NAME/...` stays readable as the folder it stands for.
_PLAIN = re.compile(r"[\w@%+=:,./$~-]+")
# An absolute path inside free text (an error, a note): one that starts the text or follows a
# space, quote, bracket, `=`, `,` or `;` (not a URL's, a relative path's or a profiler scope's
# tail); the system's folders (/usr/bin/time) name no machine and stay.
_ABSOLUTE = re.compile(
    r"(?:^|(?<=[\s\"'`(\[=,;]))/(?!(?:usr|bin|sbin|etc|dev|proc|sys|lib|lib64)/)"
    r"[\w.@+-]+(?:/[\w.@+-]+)*"
)


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


def portable_text(text: str) -> str:
    """`text` with every absolute path in it made portable (`portable_path`)."""
    return _ABSOLUTE.sub(lambda m: portable_path(m.group()), text)


def portable_record(value: Any) -> Any:
    """`value` (a record: dicts, lists, strings, numbers) with `portable_text` applied to every
    string in it, keys included: what a record or a run log is written as."""
    if isinstance(value, str):
        return portable_text(value)
    if isinstance(value, dict):
        return {portable_record(k): portable_record(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [portable_record(v) for v in value]
    return value


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
