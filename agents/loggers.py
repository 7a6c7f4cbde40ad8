"""The optional loggers of `python -m agents.train --logger`: TensorBoard event files, W&B runs."""

from __future__ import annotations

import argparse
import glob
import importlib
import json
import os
from collections.abc import Iterable
from typing import Any, ClassVar, Protocol

WANDB_PROJECT = "jaxsim-rl"
"""The W&B project of runs logged without $WANDB_PROJECT."""


class Logger(Protocol):
    """Where a run's scalars go besides metrics.csv/jsonl (which are always written)."""

    MODULE: ClassVar[str]  # the library it writes with, imported only when asked for
    EXTRA: ClassVar[str]  # the jaxsim-rl extra that installs it

    def log(self, step: int, scalars: dict[str, float]) -> None: ...

    def meta(self) -> dict[str, Any]: ...

    def close(self, failed: bool) -> None: ...


class TensorBoardLogger:
    """Event files in <out>/tensorboard, written by tensorboardX (`tensorboard --logdir
    OUT/tensorboard`).

    A fresh run removes the event files a given-up run left there; a resumed one appends a new
    event file whose first event purges what the old run logged past the checkpoint (a run
    killed between checkpoints), so each tag stays one series. The run's config is a text
    summary, "config".
    """

    MODULE = "tensorboardX"
    EXTRA = "tensorboard"
    FOLDER = "tensorboard"

    def __init__(
        self,
        out: str,
        config: dict[str, Any],
        resumed: dict[str, Any] | None,
        group: str | None = None,
    ):
        # `group` (a sweep's): each configuration's events are in its own <out>, and a
        # `--logdir` above them shows them side by side; nothing else groups them.
        del group
        from tensorboardX import SummaryWriter

        folder = os.path.join(out, self.FOLDER)
        if resumed is None:
            for old in glob.glob(os.path.join(folder, "events.out.tfevents.*")):
                os.remove(old)
        purge_step = None if resumed is None else resumed["steps"] + 1
        # Event files are named by the second they start in; the suffix keeps a resume started
        # within the same second from writing over the killed run's file, and sorts after it.
        suffix = "" if resumed is None else f".resumed_at_{resumed['steps']}"
        self._writer = SummaryWriter(folder, purge_step=purge_step, filename_suffix=suffix)
        if resumed is None:
            text = json.dumps(config, indent=2)
            # Indented: a code block in TensorBoard's markdown.
            self._writer.add_text("config", "\n".join("    " + line for line in text.split("\n")))

    def log(self, step: int, scalars: dict[str, float]) -> None:
        for tag, value in scalars.items():
            self._writer.add_scalar(tag, value, step)

    def meta(self) -> dict[str, Any]:
        return {}

    def close(self, failed: bool) -> None:
        self._writer.close()


class WandbLogger:
    """A W&B run in <out>/wandb, offline unless $WANDB_MODE says otherwise (`wandb sync
    OUT/wandb/offline-run-*` uploads it later), in project $WANDB_PROJECT (else "jaxsim-rl"),
    named after the --out folder. The run's config is the W&B config. Its id is kept in the
    checkpoint's metadata (`meta`), so a resumed run logs under the same id."""

    MODULE = "wandb"
    EXTRA = "wandb"

    def __init__(
        self,
        out: str,
        config: dict[str, Any],
        resumed: dict[str, Any] | None,
        group: str | None = None,
    ):
        import wandb

        run_id = (resumed or {}).get("wandb_run_id")
        self._run = wandb.init(
            project=os.environ.get("WANDB_PROJECT", WANDB_PROJECT),
            dir=out,
            mode=os.environ.get("WANDB_MODE", "offline"),
            name=os.path.basename(os.path.abspath(out)),
            config=config,
            group=group,  # a sweep's configurations: one W&B group
            id=run_id,
            resume="allow" if run_id else None,
            # The progress lines are in metrics.jsonl already: stdout is left alone.
            settings=wandb.Settings(console="off"),
        )

    def log(self, step: int, scalars: dict[str, float]) -> None:
        self._run.log(scalars, step=step)

    def meta(self) -> dict[str, Any]:
        return {"wandb_run_id": self._run.id}

    def close(self, failed: bool) -> None:
        import wandb

        self._run.finish(exit_code=1 if failed else 0)
        # `finish` can return before W&B's service process has written the run file out (seen
        # offline under load); shutting the service down waits for it, so the run is complete
        # on disk once `agents.train.main` returns. (Initialising the run finished any other.)
        wandb.teardown()


LOGGERS: dict[str, type[TensorBoardLogger] | type[WandbLogger]] = {
    "tensorboard": TensorBoardLogger,
    "wandb": WandbLogger,
}
"""The names `--logger` takes -> their loggers."""


def logger_names(text: str) -> list[str]:
    """Parses one `--logger`: a name of `LOGGERS` or a comma list of them."""
    names = [name.strip().lower() for name in text.split(",") if name.strip()]
    unknown = [name for name in names if name not in LOGGERS]
    if not names or unknown:
        raise argparse.ArgumentTypeError(
            f"expected {' or '.join(LOGGERS)} (or a comma list of them), got {text!r}"
        )
    return names


def check_installed(names: Iterable[str]) -> None:
    """A ValueError naming the flag and the extra to install for the first logger in `names`
    whose library does not import: checked before anything is trained."""
    for name in dict.fromkeys(names):
        logger = LOGGERS[name]
        try:
            importlib.import_module(logger.MODULE)
        except ImportError as e:
            raise ValueError(
                f"--logger {name} writes with {logger.MODULE}, which does not import ({e}); "
                f"install it with: pip install 'jaxsim-rl[{logger.EXTRA}]'"
            ) from None


def scalars(row: dict[str, Any]) -> dict[str, float]:
    """A metrics row (`agents.logs.TrainingProgress`) as the loggers' scalars: every column by
    its metrics.csv name but `step` (the x-axis: env steps per seed), and each per-seed list of
    metrics.jsonl (`returns`, `eval_returns`, `confirm_returns`) as one series per seed,
    `<name>/seed_<i>`. Missing values (None: no episode ended yet) are left out."""
    values = {}
    for name, value in row.items():
        if name == "step" or value is None:
            continue
        if isinstance(value, list):
            values |= {f"{name}/seed_{i}": float(v) for i, v in enumerate(value) if v is not None}
        else:
            values[name] = float(value)
    return values


class RunLoggers:
    """The loggers of one run, as a context manager that closes them (W&B marks the run failed
    when the block raises, `SystemExit(1)` of a diverged run included)."""

    def __init__(self, loggers: list[Logger]):
        self.loggers = loggers

    def log_row(self, row: dict[str, Any]) -> None:
        """One metrics row at its `step` (see `scalars`)."""
        if self.loggers:
            self._log(row["step"], scalars(row))

    def log_evaluation(self, evaluation: dict[str, Any]) -> None:
        """The final evaluation (eval.json) at its `steps_per_seed`: `final_eval/mean_return`,
        `final_eval/std_return_over_seeds` and `final_eval/mean_return/seed_<i>`."""
        values = {
            "final_eval/mean_return": float(evaluation["mean_return"]),
            "final_eval/std_return_over_seeds": float(evaluation["std_return_over_seeds"]),
        }
        for i, value in enumerate(evaluation["per_seed_mean_return"]):
            values[f"final_eval/mean_return/seed_{i}"] = float(value)
        self._log(evaluation["steps_per_seed"], values)

    def _log(self, step: int, values: dict[str, float]) -> None:
        for logger in self.loggers:
            logger.log(step, values)

    def meta(self) -> dict[str, Any]:
        """What the checkpoint keeps so that `--resume` continues the loggers' runs."""
        return {k: v for logger in self.loggers for k, v in logger.meta().items()}

    def close(self, failed: bool = False) -> None:
        for logger in self.loggers:
            logger.close(failed)

    def __enter__(self) -> RunLoggers:
        return self

    def __exit__(self, kind, value, traceback) -> None:
        self.close(failed=kind is not None)


def open_loggers(
    names: Iterable[str],
    out: str,
    config: dict[str, Any],
    resumed: dict[str, Any] | None,
    group: str | None = None,
) -> RunLoggers:
    """The loggers of `names` (`LOGGERS`; each once) for the run in `out`, whose config
    (JSON-serialisable) they record; `resumed`: the metadata of the checkpoint a `--resume`
    continues (`steps`, and what `RunLoggers.meta` kept), None for a fresh run; `group`: the
    sweep the run is a configuration of (a W&B group), None for a run of its own."""
    return RunLoggers([LOGGERS[name](out, config, resumed, group) for name in dict.fromkeys(names)])
