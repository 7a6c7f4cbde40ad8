"""The flags of `python -m agents.train`: its own, and one per field of the algorithm's config."""

from __future__ import annotations

import argparse
import contextlib
import dataclasses
import json
import os
import sys
import tempfile
import typing

import numpy as np

from agents import compile_cache
from agents.algorithms import ALGORITHMS, agent_type
from agents.config import check_value, field_help
from agents.loggers import logger_names


def _int_tuple(text: str) -> tuple[int, ...]:
    try:
        return tuple(int(x) for x in text.split(",") if x.strip())
    except ValueError:
        raise argparse.ArgumentTypeError(
            f"expected integers separated by commas, got {text!r}"
        ) from None


@dataclasses.dataclass(frozen=True)
class ParamFlag:
    """One `--param`: NAME=VALUE (`value`, fixed, a `jaxsim.make` override) or NAME=LOW:HIGH
    (`low`, `high`: a uniform range, drawn every episode by `jaxsim.uniform_params`)."""

    text: str  # as given, for messages
    name: str
    value: int | float | bool | None = None
    low: int | float | None = None
    high: int | float | None = None

    @property
    def is_range(self) -> bool:
        return self.low is not None


def _number(text: str, booleans: bool = False) -> int | float | bool:
    word = text.strip().lower()
    if booleans and word in ("true", "false"):
        return word == "true"
    for kind in (int, float):
        try:
            return kind(word)
        except ValueError:
            pass
    raise ValueError(text)


def param_flag(text: str) -> ParamFlag:
    """Parses `--param NAME=VALUE` or `--param NAME=LOW:HIGH` (names and values are checked
    against the environment's declarations later, by `jaxsim.make` and `jaxsim.uniform_params`)."""
    name, sep, rest = text.partition("=")
    name = name.strip()
    if not sep or not name.isidentifier() or not rest.strip():
        raise argparse.ArgumentTypeError(
            f"expected NAME=VALUE or NAME=LOW:HIGH (e.g. gravity=9.0, masspole=0.05:0.5), got "
            f"{text!r}"
        )
    try:
        if ":" in rest:
            low, high = rest.split(":", 1)
            return ParamFlag(text, name, low=_number(low), high=_number(high))
        return ParamFlag(text, name, value=_number(rest, booleans=True))
    except ValueError as e:
        raise argparse.ArgumentTypeError(
            f"{text!r}: {str(e)!r} is not a number (VALUE: a number, true or false; LOW:HIGH: "
            "two numbers)"
        ) from None


@dataclasses.dataclass(frozen=True)
class SweepFlag:
    """One `--sweep NAME=V1,V2,...`: a float hyperparameter and its values (`agents.sweep`)."""

    text: str  # as given, for messages
    name: str
    values: tuple[float, ...]


def sweep_flag(text: str) -> SweepFlag:
    """Parses `--sweep NAME=V1,V2,...` (the name and values are checked against the config
    later, by `agents.sweep.check_sweep`)."""
    name, sep, rest = text.partition("=")
    name = name.strip()
    words = [w.strip() for w in rest.split(",")]
    if not sep or not name.isidentifier() or not all(words):
        raise argparse.ArgumentTypeError(
            f"expected NAME=V1,V2,... (a config field and numbers separated by commas, e.g. "
            f"learning_rate=1e-4,3e-4), got {text!r}"
        )
    values = []
    for word in words:
        try:
            value = float(word)
        except ValueError:
            raise argparse.ArgumentTypeError(
                f"{text!r}: {word!r} is not a number (expected NAME=V1,V2,...)"
            ) from None
        if not np.isfinite(value):
            raise argparse.ArgumentTypeError(f"{text!r}: {word!r} is not a finite number")
        values.append(value)
    return SweepFlag(text, name, tuple(values))


RUN_FILES = (
    "checkpoint.msgpack",
    "config.json",
    "metrics.csv",
    "metrics.jsonl",
    "eval.json",
    "curve.png",
    "episode.gif",
)
"""What a run writes in --out: a folder holding any of them holds a run."""


NO_TARGET = "none"


def target_return(text: str) -> float | str:
    if text.strip().lower() == NO_TARGET:
        return NO_TARGET
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(
            f"expected a return (a number) or 'none', got {text!r}"
        ) from None
    if not np.isfinite(value):
        raise argparse.ArgumentTypeError(f"expected a finite return, got {text!r}")
    return value


def build_parser(algorithm: str = "ppo") -> argparse.ArgumentParser:
    """The command's parser, with the config flags of `algorithm`."""
    parser = argparse.ArgumentParser(
        prog="python -m agents.train",
        description="Train an agent on a jaxsim environment, many seeds in one jit.",
    )
    parser.add_argument("algorithm", choices=ALGORITHMS)
    parser.add_argument("--env", default="CartPole-v1", help="a jaxsim environment id")
    parser.add_argument(
        "--param",
        dest="params",
        metavar="NAME=VALUE|NAME=LOW:HIGH",
        type=param_flag,
        action="append",
        default=[],
        help="repeatable; NAME=VALUE fixes an environment setting (a params field, or static "
        "config) for the whole run, passed to jaxsim.make; NAME=LOW:HIGH draws params field "
        "NAME uniformly in [LOW, HIGH) every training episode (jaxsim.uniform_params; ints: "
        "LOW..HIGH inclusive). Evaluation runs on the environment's params without the ranges",
    )
    parser.add_argument("--seeds", type=int, default=1, help="seeds trained at once (vmap)")
    parser.add_argument(
        "--sweep",
        dest="sweep",
        metavar="NAME=V1,V2,...",
        type=sweep_flag,
        action="append",
        default=[],
        help="repeatable; train every combination of these values of float hyperparameters "
        "(learning_rate, ent_coef, gamma, ...: no sizes) x --seeds in one program; each "
        "configuration writes its run to <out>/config_<i>, the sweep its table (sweep.csv, "
        "sweep.md), sweep.png and the best configuration (sweep.json)",
    )
    parser.add_argument(
        "--seed", type=int, default=None, help="base PRNG seed (default 0; --resume: the run's)"
    )
    parser.add_argument(
        "--out",
        default=None,
        help="output folder (default runs/<env>); one that holds a run is refused without "
        "--resume or --overwrite",
    )
    parser.add_argument(
        "--checkpoint-every",
        type=int,
        default=0,
        help="updates between checkpoints (0: only at the end); changes nothing in the result "
        "(stop checks stay every log_every updates)",
    )
    parser.add_argument(
        "--resume", action="store_true", help="continue from <out>/checkpoint.msgpack"
    )
    parser.add_argument(
        "--overwrite",
        action="store_true",
        help=f"replace the run in --out: its files ({', '.join(RUN_FILES)}) are removed first",
    )
    parser.add_argument(
        "--devices",
        type=int,
        default=None,
        help="split the environments of every rollout over this many devices (the first N of "
        "jax.devices(), mesh axis jaxsim.ENV_AXIS); --num-envs must be a multiple of N",
    )
    parser.add_argument(
        "--target-return",
        type=target_return,
        default=None,
        help="stop a seed once its deterministic evaluation (eval_envs episodes, checked every "
        "log_every updates) and an independent one confirming it (>= 32 episodes, the final "
        "evaluation's) reach this mean return, and the run once every seed has; 'none' trains "
        "the whole budget (default: the preset's target, agents.presets.TARGETS; with --resume, "
        "the run's)",
    )
    parser.add_argument(
        "--compilation-cache",
        metavar="DIR",
        default=None,
        help="JAX's persistent compilation cache folder: later runs load the compiled loop "
        f"instead of compiling it (default: ${compile_cache.ENV_VAR}, else ~/.cache/jaxsim/xla)",
    )
    parser.add_argument(
        "--no-compilation-cache", action="store_true", help="compile everything afresh"
    )
    parser.add_argument("--no-plot", action="store_true", help="skip curve.png and episode.gif")
    parser.add_argument("--quiet", action="store_true", help="no progress lines")
    parser.add_argument(
        "--logger",
        dest="loggers",
        metavar="NAME[,NAME]",
        type=logger_names,
        action="extend",
        default=[],
        help="repeatable or a comma list: also log every metrics row (and the final "
        "evaluation) to tensorboard (<out>/tensorboard, tensorboardX; extra [tensorboard]) or "
        "wandb (<out>/wandb, offline unless $WANDB_MODE says otherwise; extra [wandb]); "
        "metrics.csv and metrics.jsonl are always written",
    )
    parser.add_argument(
        "--profile",
        metavar="DIR",
        default=None,
        help="after training, profile one update with jaxsim.profile: a per-phase table and "
        "DIR/<algorithm>_<env>.{json,png,trace.json.gz} (open the trace in ui.perfetto.dev)",
    )
    config_type = agent_type(algorithm).config_type
    add_config_flags(parser, config_type, "(defaults: the environment's preset)")
    return parser


def add_config_flags(parser: argparse.ArgumentParser, config_cls: type, note: str = "") -> None:
    """One flag per field of the dataclass `config_cls`, `--field-name`, in a group of its own.

    The flag's text is the field's help (`agents.config.config_field`) and its default; its type
    follows the field's annotation: bool -> `--x` / `--no-x`, tuple[int, ...] -> "64,64", else
    int, float or str. Flags default to None, meaning "not given" (see `config_overrides`).
    """
    group = parser.add_argument_group(f"{config_cls.__name__} {note}".strip())
    types = typing.get_type_hints(config_cls)
    for field in dataclasses.fields(config_cls):
        flag = "--" + field.name.replace("_", "-")
        help_text = f"{field_help(field)} ({config_cls.__name__} default: {field.default!r})"
        kind = types[field.name]
        if kind is bool:
            group.add_argument(
                flag, action=argparse.BooleanOptionalAction, default=None, help=help_text
            )
        elif kind == tuple[int, ...]:
            group.add_argument(flag, type=_int_tuple, default=None, help=help_text)
        elif kind in (int, float, str):
            group.add_argument(flag, type=kind, default=None, help=help_text)
        else:
            raise TypeError(f"{config_cls.__name__}.{field.name}: no flag for type {kind}")


def config_overrides(args: argparse.Namespace, config_cls: type) -> dict:
    """The `config_cls` fields given on the command line: {name: value}."""
    names = (f.name for f in dataclasses.fields(config_cls))
    return {n: getattr(args, n) for n in names if getattr(args, n) is not None}


def check_out(out: str) -> None:
    """--out must be a folder this process can write: checked before anything compiles."""
    if os.path.exists(out) and not os.path.isdir(out):
        raise ValueError(f"--out: {out} exists and is not a folder")
    try:
        os.makedirs(out, exist_ok=True)
        with tempfile.NamedTemporaryFile(dir=out, prefix=".write-check."):
            pass
    except OSError as e:
        raise ValueError(f"--out: cannot write to {out} ({e.strerror or e})") from None


def check_no_run(out: str, overwrite: bool) -> None:
    """Without --resume, --out must not hold a run, unless --overwrite gives it up."""
    found = [name for name in RUN_FILES if os.path.exists(os.path.join(out, name))]
    if found and not overwrite:
        raise ValueError(
            f"--out: {out} already holds a run ({', '.join(found)}); pass --resume to continue "
            "it, --overwrite to replace it, or another --out"
        )
    if found and not written_by_a_run(out):
        raise ValueError(
            f"--overwrite: {out} holds {', '.join(found)}, but no config.json a jaxsim run wrote "
            f"(its 'format' starts with {RUN_FORMAT_PREFIX!r}): these files are not removed; "
            "choose another --out"
        )


RUN_FORMAT_PREFIX = "jaxsim-agents-"


def written_by_a_run(out: str) -> bool:
    """True if `out` holds the config.json of a jaxsim run (every run writes one beside its
    checkpoint): what `--overwrite` reads before removing a run's files, by their content
    rather than their names."""
    try:
        with open(os.path.join(out, "config.json")) as f:
            meta = json.load(f)
    except (OSError, ValueError):
        return False
    return isinstance(meta, dict) and str(meta.get("format", "")).startswith(RUN_FORMAT_PREFIX)


def flag_text(name: str, value) -> str:
    """How the flag of `name` (a config field or a command's dest: `num_envs` -> `--num-envs`)
    reads with `value` on a command line: `--num-envs 8`, `--hidden 64,64`, `--no-anneal-lr`,
    `no --devices` (None)."""
    flag = "--" + name.replace("_", "-")
    if value is None:
        return f"no {flag}"
    if isinstance(value, bool):
        return flag if value else f"--no-{flag[2:]}"
    if isinstance(value, list | tuple):
        return f"{flag} {','.join(str(v) for v in value)}"
    return f"{flag} {value}"


def resume_changes(saved: dict, asked: dict) -> list[str]:
    """What a `--resume` would change, one "--flag saved, not --flag asked" for each name of
    `asked` whose value differs from `saved`'s (names `saved` lacks, written by older versions,
    are not compared). Keys are config fields or flag dests (`num_envs`, `seeds`)."""
    return [
        f"{flag_text(k, saved[k])}, not {flag_text(k, v)}"
        for k, v in asked.items()
        if k in saved and saved[k] != v
    ]


def refuse_resume(path: str, changes: list[str]) -> None:
    """The ValueError of a `--resume` whose flags change the run in `path` (see
    `resume_changes`); nothing if `changes` is empty."""
    if changes:
        raise ValueError(
            f"--resume: {path} was trained with {'; '.join(changes)}; pass the run's flags to "
            "resume it, or a new --out"
        )


def check_output_file(flag: str, path: str, run: str, own: str) -> None:
    """A ValueError naming `flag` and the file unless a command may write `path`: a file, never
    a folder, in a folder that exists, and never a file of a run (any file of the run folder
    `run` but the one the command writes there by default, `own`, or one of `RUN_FILES` in a
    folder that holds a run). Checked before any work."""
    if os.path.isdir(path):
        raise ValueError(f"{flag} {path}: is a folder; name the file to write in it")
    folder = os.path.dirname(os.path.abspath(path))
    if not os.path.isdir(folder):
        raise ValueError(f"{flag} {path}: no folder {folder} to write it in")
    target = os.path.realpath(path)
    if target == os.path.realpath(own):
        return
    hint = f"name a new file (default: {own})"
    if os.path.exists(path) and os.path.isdir(run):
        for name in sorted(os.listdir(run)):
            mine = os.path.join(run, name)
            if os.path.isfile(mine) and os.path.samefile(mine, path):
                raise ValueError(
                    f"{flag} {path}: refused, it would write over {mine}, a file of the run "
                    f"{run}; {hint}"
                )
    if os.path.basename(target) in RUN_FILES and _holds_run(os.path.dirname(target)):
        raise ValueError(
            f"{flag} {path}: refused, it would write over {os.path.basename(target)} of the run "
            f"in {os.path.dirname(target)}; {hint}"
        )


def _holds_run(folder: str) -> bool:
    return any(os.path.exists(os.path.join(folder, name)) for name in RUN_FILES)


def clear_run(out: str) -> None:
    """Removes a run's files from `out` (--overwrite, once every check has passed)."""
    for name in RUN_FILES:
        with contextlib.suppress(FileNotFoundError):
            os.remove(os.path.join(out, name))


def check_flag(parser: argparse.ArgumentParser, flag: str, value, kind: type = int, **declared):
    """parser.error (exit 2) naming `flag`, its value and what it accepts, unless `value` is of
    `kind` within `declared` (ge, gt, le, lt: see `agents.config.check_value`)."""
    try:
        check_value(parser.prog, flag, value, kind, **declared)
    except ValueError as e:  # parser.error names the program already
        parser.error(str(e).removeprefix(f"{parser.prog}: "))


SEED_MAX = 2**63 - 1
"""The largest seed: `jax.random.key` takes a signed 64-bit integer."""


def check_seed_flag(
    parser: argparse.ArgumentParser, seed: int, low: int = -SEED_MAX - 1, high: int = SEED_MAX
) -> None:
    """parser.error (exit 2) naming --seed unless low <= seed <= high (default: a 64-bit seed,
    what `jax.random.key` takes)."""
    if not low <= seed <= high:
        parser.error(f"--seed must be an integer >= {low} and <= {high}, got {seed}")


def setup_cache(parser: argparse.ArgumentParser, args: argparse.Namespace) -> str | None:
    """Turns the compilation cache on (or off); returns its folder. A folder the user named
    that cannot be used is an error; the default one (a read-only home) falls back to no
    cache with one warning, since the run does not need it."""
    if args.no_compilation_cache:
        compile_cache.disable()
        return None
    try:
        return compile_cache.enable(args.compilation_cache)
    except ValueError as e:
        if args.compilation_cache is not None:
            parser.error(f"--compilation-cache: {e}")
        compile_cache.disable()
        source = (
            f"${compile_cache.ENV_VAR}"
            if os.environ.get(compile_cache.ENV_VAR)
            else "the default folder"
        )
        print(
            f"warning: {e} ({source}); compiling without a cache (--compilation-cache DIR "
            "names a writable folder, --no-compilation-cache silences this)",
            file=sys.stderr,
        )
        return None
