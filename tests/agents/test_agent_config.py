"""Agents' configs: one common base, declared ranges checked by one helper, old JSON still loads."""

import dataclasses
import json
import os

import numpy as np
import pytest

from agents.config import AgentConfig, check_value, declared_specs
from agents.decoupled import train as decoupled_train
from agents.decoupled.run import DecoupledConfig
from agents.dqn import DQNConfig
from agents.offpolicy import OffPolicyConfig
from agents.ppo import PPOConfig
from agents.sac import SACConfig

HERE = os.path.dirname(__file__)
CONFIGS = (PPOConfig, DQNConfig, SACConfig)
# Defaults changed since c12f7fc: an old config keeps the value it was run with.
OLD_DEFAULTS = {"SACConfig": {"learning_starts": 256}}  # 100 since SB3's SAC starts there


def test_config_json_written_before_the_common_base_still_loads():
    # Written by `config.to_dict()` at c12f7fc, before AgentConfig existed (as config.json is).
    with open(os.path.join(HERE, "data", "agent_configs_c12f7fc.json")) as f:
        old = json.load(f)
    for cls in CONFIGS:
        config = cls.from_dict(old[cls.__name__])
        # Fields added since (PPO's network, conv_channels) take their defaults.
        assert config == cls(**OLD_DEFAULTS.get(cls.__name__, {}))
        written = config.to_dict()
        assert {name: written[name] for name in old[cls.__name__]} == old[cls.__name__]
        assert cls.from_dict(json.loads(json.dumps(config.to_dict()))) == config


def test_decoupled_benchmark_record_config_still_loads():
    with open(os.path.join(HERE, "..", "..", "agents", "decoupled", "bench_cpu2_vm.json")) as f:
        PPOConfig.from_dict(json.load(f)["config"])


def test_common_fields_are_declared_once():
    common = [f.name for f in dataclasses.fields(AgentConfig)]
    base_specs = declared_specs(AgentConfig)
    for cls in (*CONFIGS, OffPolicyConfig):
        assert [f.name for f in dataclasses.fields(cls)][: len(common)] == common
        specs = declared_specs(cls)
        for name, spec in base_specs.items():  # a redeclared default keeps the base's range
            assert dataclasses.replace(specs[name], default=None) == dataclasses.replace(
                spec, default=None
            ), (cls.__name__, name)
    for name in ("learning_rate", "target_update_every", "tau", "batch_size"):
        off = declared_specs(OffPolicyConfig)[name]
        for cls in (DQNConfig, SACConfig):
            assert dataclasses.replace(declared_specs(cls)[name], default=None) == (
                dataclasses.replace(off, default=None)
            )


def _outside(spec):
    """A value just outside `spec`'s range (None when it has no bound)."""
    step = 1 if spec.kind is int else 1e-3
    if spec.ge is not None:
        return spec.ge - step
    if spec.gt is not None:
        return spec.gt
    if spec.le is not None:
        return spec.le + step
    return None


@pytest.mark.parametrize("cls", [*CONFIGS, DecoupledConfig])
def test_every_declared_range_is_enforced_with_field_given_and_accepted(cls):
    def make(**kw):
        if cls is DecoupledConfig:
            return DecoupledConfig("gymnasium/CartPole-v1", **kw).check(PPOConfig())
        return cls(**kw)

    make()  # the defaults are valid
    checked = 0
    for name, spec in declared_specs(cls).items():
        bad = spec.kind.__name__ if spec.kind is str else _outside(spec)
        if bad is None:
            continue
        with pytest.raises(ValueError) as info:
            make(**{name: bad})
        text = str(info.value)
        assert text.startswith(f"{cls.__name__}: {name} must be "), text
        assert spec.describe() in text and f"got {spec.kind(bad)!r}" in text, text
        checked += 1
    assert checked >= 3


def test_wrong_kinds_are_value_errors_naming_the_field():
    with pytest.raises(ValueError, match=r"PPOConfig: num_envs must be an integer >= 1, got True"):
        PPOConfig(num_envs=True)
    with pytest.raises(ValueError, match=r"PPOConfig: num_steps must be an integer >= 1, got 2.0"):
        PPOConfig(num_steps=2.0)
    with pytest.raises(ValueError, match=r"PPOConfig: ent_coef must be a finite float >= 0"):
        PPOConfig(ent_coef=float("nan"))
    with pytest.raises(ValueError, match=r"PPOConfig: hidden\[1\] must be an integer >= 1, got 0"):
        PPOConfig(hidden=(64, 0))
    with pytest.raises(ValueError, match=r"replay.init: capacity must be an integer >= 1, got 0"):
        check_value("replay.init", "capacity", 0, ge=1)


def test_numpy_scalars_are_stored_as_python_numbers():
    config = PPOConfig(num_envs=np.int64(8), learning_rate=np.float32(0.5))
    assert type(config.num_envs) is int and type(config.learning_rate) is float
    assert json.loads(json.dumps(config.to_dict()))["num_envs"] == 8


def test_decoupled_flags_reach_their_fields_by_name():
    parser = decoupled_train.build_parser()
    args = parser.parse_args(["ppo", "--env", "gymnasium/CartPole-v1", "--seed", "7"])
    dc = decoupled_train.decoupled_config(args)
    assert dc.seed == 7 and dc.envpool_threads == 0


def test_command_line_numbers_are_checked_by_the_same_helper(capsys, tmp_path):
    from agents import train

    for flags, message in [
        (["--checkpoint-every", "-1"], "--checkpoint-every must be an integer >= 0, got -1"),
        (["--devices", "99"], "--devices (jax.devices(): "),
    ]:
        with pytest.raises(SystemExit) as info:
            train.main(["ppo", "--out", str(tmp_path), *flags])
        assert info.value.code == 2
        err = capsys.readouterr().err
        assert message in err and err.count("agents.train") <= 2, err
