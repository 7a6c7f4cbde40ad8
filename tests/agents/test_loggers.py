"""`--logger tensorboard|wandb`: each one's own tools read back what a tiny run logged; a
missing library is an exit-2 error naming the extra, before anything compiles."""

from __future__ import annotations

import importlib.util
import json
import struct
import sys

import numpy as np
import pytest

from agents import checkpoint, logs, train
from agents.train_args import build_parser

TINY = [
    "ppo", "--env", "CartPole-v1", "--seeds", "2", "--total-steps", "128", "--num-envs", "2",
    "--num-steps", "32", "--num-minibatches", "2", "--update-epochs", "1", "--hidden", "8",
    "--eval-envs", "2", "--log-every", "1", "--no-plot", "--quiet",
]  # fmt: skip


def _installed(*modules: str) -> bool:
    return all(importlib.util.find_spec(m) is not None for m in modules)


# tensorboardX writes; tensorboard's own EventAccumulator reads.
TENSORBOARD = _installed("tensorboardX", "tensorboard")
WANDB = _installed("wandb")
needs_tensorboard = pytest.mark.skipif(
    not TENSORBOARD,
    reason="tensorboardX and tensorboard are not installed: pip install 'jaxsim-rl[tensorboard]'",
)
needs_wandb = pytest.mark.skipif(
    not WANDB, reason="wandb is not installed: pip install 'jaxsim-rl[wandb]'"
)


@pytest.fixture(scope="module")
def logged_run(tmp_path_factory):
    """A tiny two-seed run logged to every logger installed (one compile for all the tests)."""
    names = [name for name, ok in (("tensorboard", TENSORBOARD), ("wandb", WANDB)) if ok]
    if not names:
        pytest.skip("neither logger's library is installed: pip install 'jaxsim-rl[logs]'")
    out = tmp_path_factory.mktemp("logged")
    with pytest.MonkeyPatch.context() as patch:  # W&B: offline, quiet, no network
        patch.setenv("WANDB_MODE", "offline")
        patch.setenv("WANDB_SILENT", "true")
        patch.delenv("WANDB_PROJECT", raising=False)
        train.main([*TINY, "--out", str(out), "--logger", ",".join(names)])
    return out


@needs_tensorboard
def test_tensorboards_reader_finds_each_seeds_return_curve(logged_run):
    from tensorboard.backend.event_processing.event_accumulator import EventAccumulator

    events = EventAccumulator(str(logged_run / "tensorboard"))
    events.Reload()
    rows = logs.read_metrics(str(logged_run))
    steps = [r["step"] for r in rows]
    assert steps == [64, 128]

    def curve(tag):
        return [e.step for e in events.Scalars(tag)], [e.value for e in events.Scalars(tag)]

    assert curve("mean_return") == (steps, pytest.approx([r["mean_return"] for r in rows]))
    for seed in range(2):  # each seed its own series
        returns = [r["returns"][seed] for r in rows]
        assert curve(f"returns/seed_{seed}") == (steps, pytest.approx(returns))
    assert curve("policy_loss")[0] == steps and curve("eval_return")[0] == steps
    final = json.loads((logged_run / "eval.json").read_text())
    assert curve("final_eval/mean_return") == ([128], pytest.approx([final["mean_return"]]))
    (config,) = events.Tensors("config/text_summary")
    text = config.tensor_proto.string_val[0].decode()
    assert '"env_id": "CartPole-v1"' in text and '"total_steps": 128' in text


def _wandb_records(path):
    """The records of a W&B run file (run-<id>.wandb): a 7-byte header, then LevelDB's log
    format (32 KiB blocks of chunks with a 7-byte header: CRC, length, type) holding
    wandb_internal_pb2.Record messages. wandb has no Python reader of its own."""
    from wandb.proto import wandb_internal_pb2

    block, data = 32768, path.read_bytes()
    assert data[:4] == b":W&B"
    pos, record = 7, b""
    while pos + 7 <= len(data):
        if block - pos % block < 7:  # a block's tail too short for a header is padding
            pos += block - pos % block
            continue
        _, length, kind = struct.unpack("<IHB", data[pos : pos + 7])
        record += data[pos + 7 : pos + 7 + length]
        pos += 7 + length
        if kind in (1, 4):  # FULL or LAST: a whole record
            parsed = wandb_internal_pb2.Record()
            parsed.ParseFromString(record)
            yield parsed
            record = b""


def _items(items) -> dict:
    # A name comes as `key` or as `nested_key` (a path; history's, of one name here).
    return {i.key or ".".join(i.nested_key): json.loads(i.value_json) for i in items}


@needs_wandb
def test_wandb_offline_run_holds_the_metrics_and_config(logged_run):
    (run_dir,) = (logged_run / "wandb").glob("offline-run-*")
    (run_file,) = run_dir.glob("run-*.wandb")
    config, history = {}, []
    for record in _wandb_records(run_file):
        kind = record.WhichOneof("record_type")
        if kind == "run":
            run_id = record.run.run_id
            config |= _items(record.run.config.update)
        elif kind == "config":
            config |= _items(record.config.update)
        elif kind == "history":
            history.append(_items(record.history.item))
    assert config["algorithm"] == "ppo" and config["env_id"] == "CartPole-v1"
    assert config["num_seeds"] == 2 and config["seed"] == 0
    assert config["config"]["total_steps"] == 128 and config["config"]["hidden"] == [8]
    assert config["command"].startswith("python -m agents.train ppo")
    rows = logs.read_metrics(str(logged_run))
    assert [h["_step"] for h in history] == [r["step"] for r in rows] == [64, 128]
    for h, r in zip(history, rows, strict=True):
        assert h["update"] == r["update"]
        assert h["mean_return"] == pytest.approx(r["mean_return"])
        assert [h["returns/seed_0"], h["returns/seed_1"]] == pytest.approx(r["returns"])
    final = json.loads((logged_run / "eval.json").read_text())
    assert history[-1]["final_eval/mean_return"] == pytest.approx(final["mean_return"])
    # --resume logs under the same W&B run: the checkpoint keeps its id.
    meta, _ = checkpoint.read_meta(str(logged_run / "checkpoint.msgpack"))
    assert meta["wandb_run_id"] == run_id and run_dir.name.endswith(run_id)


@pytest.mark.parametrize(
    ("logger", "module", "extra"),
    [("tensorboard", "tensorboardX", "tensorboard"), ("wandb", "wandb", "wandb")],
)
def test_a_missing_library_is_an_exit_2_error_naming_the_extra(
    monkeypatch, capsys, tmp_path, logger, module, extra
):
    monkeypatch.setitem(sys.modules, module, None)  # `import module` now raises ImportError
    out = tmp_path / "run"
    with pytest.raises(SystemExit) as info:
        train.main([*TINY, "--out", str(out), "--logger", f"{logger}"])
    assert info.value.code == 2
    err = capsys.readouterr().err
    assert f"--logger {logger} writes with {module}, which does not import" in err
    assert f"pip install 'jaxsim-rl[{extra}]'" in err
    assert not out.exists()  # refused before --out was even made


def test_logger_flag_is_repeatable_or_a_comma_list(capsys):
    parser = build_parser()
    assert parser.parse_args(["ppo"]).loggers == []
    args = parser.parse_args(["ppo", "--logger", "tensorboard", "--logger", "WandB, tensorboard"])
    assert args.loggers == ["tensorboard", "wandb", "tensorboard"]  # each opened once
    with pytest.raises(SystemExit) as info:
        parser.parse_args(["ppo", "--logger", "mlflow"])
    assert info.value.code == 2
    assert "expected tensorboard or wandb (or a comma list of them), got 'mlflow'" in (
        capsys.readouterr().err
    )


def test_scalars_name_each_seed_and_leave_out_missing_values():
    from agents.loggers import scalars

    row = {"update": 3, "step": 96, "mean_return": None, "returns": [None, 2.5], "sps": 10.0}
    assert scalars(row) == {"update": 3.0, "returns/seed_1": 2.5, "sps": 10.0}
    assert np.isnan(scalars({"step": 1, "policy_loss": float("nan")})["policy_loss"])


@needs_tensorboard
def test_tensorboard_resume_replaces_what_was_logged_past_the_checkpoint(tmp_path):
    from tensorboard.backend.event_processing.event_accumulator import EventAccumulator

    from agents.loggers import TensorBoardLogger

    def log(resumed, values):
        logger = TensorBoardLogger(str(tmp_path), {"env_id": "CartPole-v1"}, resumed)
        for step, value in values.items():
            logger.log(step, {"mean_return": value})
        logger.close(failed=False)

    def curve():
        events = EventAccumulator(str(tmp_path / "tensorboard"))
        events.Reload()
        return {e.step: e.value for e in events.Scalars("mean_return")}

    log(None, {64: 1.0, 128: 2.0, 192: 3.0})  # killed after 192; its checkpoint is at 128
    log({"steps": 128}, {192: 30.0, 256: 40.0})
    assert curve() == {64: 1.0, 128: 2.0, 192: 30.0, 256: 40.0}
    log(None, {64: 5.0})  # a fresh run in the folder (--overwrite) starts a new curve
    assert curve() == {64: 5.0}


@needs_wandb
def test_wandb_resume_logs_under_the_same_run_id(tmp_path, monkeypatch):
    from agents.loggers import WandbLogger

    monkeypatch.setenv("WANDB_MODE", "offline")
    monkeypatch.setenv("WANDB_SILENT", "true")
    first = WandbLogger(str(tmp_path), {"env_id": "CartPole-v1"}, None)
    first.log(64, {"mean_return": 1.0})
    first.close(failed=True)  # killed
    run_id = first.meta()["wandb_run_id"]
    again = WandbLogger(str(tmp_path), {"env_id": "CartPole-v1"}, {"wandb_run_id": run_id})
    again.log(128, {"mean_return": 2.0})
    again.close(failed=False)
    logged = {}  # `wandb sync` uploads both folders to the one run
    for run_file in (tmp_path / "wandb").glob("offline-run-*/run-*.wandb"):
        for record in _wandb_records(run_file):
            if record.WhichOneof("record_type") == "run":
                logged[run_file] = (record.run.run_id, [])
            elif record.WhichOneof("record_type") == "history":
                logged[run_file][1].append(record.history.step.num)
    assert sorted(logged.values()) == [(run_id, [64]), (run_id, [128])]
