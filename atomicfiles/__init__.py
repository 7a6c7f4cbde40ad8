"""Files that results and checkpoints go into: atomic writes, strict JSON, stale temporaries.

One home for what the library, the agents and the benchmarks all write. A file is written to a
temporary beside it, fsynced, then renamed over the target, so a reader sees the old content or
the whole new one, never a torn file. Temporaries are named `.<name>.<pid>.<random>.tmp`, so a
later run can tell a dead writer's leftovers (`remove_stale_temporaries`) from a live one's.
"""

from __future__ import annotations

import io
import json
import math
import os
import re
import tempfile
from pathlib import Path
from typing import Any

_TEMPORARY = re.compile(r"^\..+\.(\d+)\.[^.]+\.tmp$")


def atomic_write(path: str | os.PathLike, data: bytes) -> Path:
    """Writes `data` so that `path` holds either its old content or the whole new one."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(
        dir=path.parent, prefix=f".{path.name}.{os.getpid()}.", suffix=".tmp"
    )
    try:
        os.fchmod(fd, 0o666 & ~_umask())  # mkstemp makes 0600; outputs are for everyone to read
        with os.fdopen(fd, "wb") as f:
            f.write(data)
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise
    _fsync_dir(path.parent)
    return path


def write_figure_atomic(fig: Any, path: str | os.PathLike, **savefig: Any) -> Path:
    """Writes a matplotlib figure as a PNG at `path` (atomically, as every output here); the
    keywords go to `fig.savefig`."""
    buf = io.BytesIO()
    fig.savefig(buf, format="png", **savefig)
    return atomic_write(path, buf.getvalue())


def finite_json(obj: Any) -> Any:
    """`obj` with every NaN and inf float replaced by None: JSON has neither."""
    if isinstance(obj, float) and not math.isfinite(obj):
        return None
    if isinstance(obj, dict):
        return {str(k): finite_json(v) for k, v in obj.items()}
    if isinstance(obj, list | tuple):
        return [finite_json(v) for v in obj]
    return obj


def write_json_atomic(path: str | os.PathLike, obj: Any, *, indent: int = 2) -> Path:
    """`obj` as JSON, written atomically; serialised (strictly: a NaN is a ValueError, see
    `finite_json`) before any file is touched."""
    return atomic_write(path, (json.dumps(obj, indent=indent, allow_nan=False) + "\n").encode())


def remove_stale_temporaries(directory: str | os.PathLike) -> list[Path]:
    """Removes the temporaries `atomic_write` left in `directory` when its writer died.

    A temporary whose writer process is still alive is kept. Returns the paths removed.
    """
    directory = Path(directory)
    if not directory.is_dir():
        return []
    removed = []
    for path in directory.iterdir():
        match = _TEMPORARY.match(path.name)
        if match and not _alive(int(match.group(1))):
            path.unlink(missing_ok=True)
            removed.append(path)
    return removed


def _alive(pid: int) -> bool:
    if pid == os.getpid():
        return True
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


def _umask() -> int:
    mask = os.umask(0o022)
    os.umask(mask)
    return mask


def _fsync_dir(path: Path) -> None:
    """Makes a rename in `path` durable (best effort: not every file system allows it)."""
    try:
        fd = os.open(path, os.O_RDONLY)
    except OSError:
        return
    try:
        os.fsync(fd)
    except OSError:
        pass
    finally:
        os.close(fd)
