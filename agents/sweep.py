"""Hyperparameter sweeps in one jit: float hyperparameters as traced arrays, vmapped with seeds.

A config's float fields (learning rate, entropy and value coefficients, clip range, gamma, GAE
lambda, epsilon schedule ends, tau, max grad norm, ...) change values, never shapes or the
program, so many of them can run as one compiled program: `with_hparams(agent, {name: x})` is
the agent with those fields set to (traced) arrays and its optimiser rebuilt from them (optax
takes a traced learning rate or clip norm as it takes a float), and `Swept` carries each run's
values in its runner (`SweepState.hparams`), so one `vmap` over a leading axis of
configurations x seeds trains them all. Any other field (sizes, counts, flags, choices: what
fixes array shapes or the program) is refused by name (`check_sweep`).

    grid = {"learning_rate": [1e-4, 3e-4], "ent_coef": [0.0, 0.01]}
    train = make_train(PPOConfig(), env, sweep=grid)
    runner, metrics = jax.jit(jax.vmap(train))(keys)  # leaves [seeds, 4 configurations, ...]

Configurations are the grid of the values, in `grid` order (the first name varies slowest).
A configuration of a sweep follows the run of its concrete config (`sweep_configs`) with the
same key up to float rounding: the values enter the program as float32 arrays instead of
constants XLA may fold.
"""

from __future__ import annotations

import copy
import dataclasses
import itertools
import typing
from collections.abc import Callable, Mapping, Sequence
from typing import Any

import jax
import jax.numpy as jnp
import numpy as np
from flax import struct

from agents.agent import Agent, compiler_options
from agents.structs import Metrics


def sweepable(config_cls: type) -> tuple[str, ...]:
    """The fields of `config_cls` a sweep may vary: those annotated `float` (values that enter
    the traced losses, schedules and optimiser, never a shape)."""
    types = typing.get_type_hints(config_cls)
    return tuple(f.name for f in dataclasses.fields(config_cls) if types[f.name] is float)


@dataclasses.dataclass(frozen=True)
class Sweep:
    """A checked grid of hyperparameter values: `names` and, per configuration, its values."""

    names: tuple[str, ...]
    values: tuple[tuple[float, ...], ...]  # [num_configs][len(names)]

    @property
    def num_configs(self) -> int:
        return len(self.values)

    def as_dicts(self) -> list[dict[str, float]]:
        return [dict(zip(self.names, v, strict=True)) for v in self.values]

    def arrays(self) -> dict[str, np.ndarray]:
        """{name: float32[num_configs]}: the pytree of traced hyperparameters."""
        table = np.asarray(self.values, np.float32).reshape(self.num_configs, len(self.names))
        return {n: table[:, i] for i, n in enumerate(self.names)}

    def grid_dict(self) -> dict[str, list[float]]:
        """{name: its distinct values in grid order} (what the command's --sweep flags gave)."""
        return {n: list(dict.fromkeys(v[i] for v in self.values)) for i, n in enumerate(self.names)}


def grid(values: Mapping[str, Sequence[float]]) -> list[dict[str, float]]:
    """The cartesian product of `values` ({name: values}), the first name varying slowest."""
    names = list(values)
    return [dict(zip(names, combo, strict=True)) for combo in itertools.product(*values.values())]


def check_sweep(config, values: Mapping[str, Sequence[float]], given: Sequence[str] = ()) -> Sweep:
    """`values` ({name: values}) checked against `config` (a config dataclass instance) -> Sweep.

    A ValueError names: fields `config` does not have; fields that are not float hyperparameters
    (they change array shapes or the program: num_envs, hidden, num_steps, num_minibatches,
    anneal_lr, ...), all of them at once; a name also fixed in `given` (the command's flags);
    an empty list of values, a repeated value; and, by name and value, any value the field's
    declared range refuses (the config's own check).
    """
    owner = type(config).__name__
    fields = [f.name for f in dataclasses.fields(config)]
    unknown = [n for n in values if n not in fields]
    if unknown:
        raise ValueError(f"sweep: {owner} has no field(s) {unknown}; its fields are {fields}")
    allowed = sweepable(type(config))
    refused = [n for n in values if n not in allowed]
    if refused:
        verb = "they change" if len(refused) > 1 else "it changes"
        raise ValueError(
            f"sweep: {', '.join(refused)} cannot be swept: {verb} "
            f"array shapes or the compiled program (one program runs every configuration); "
            f"{owner}'s sweepable hyperparameters are {list(allowed)}"
        )
    twice = [n for n in values if n in given]
    if twice:
        raise ValueError(
            f"sweep: {', '.join(twice)} is given both as a flag and as a sweep; pass one"
        )
    for name, vals in values.items():
        vals = list(vals)
        if not vals:
            raise ValueError(f"sweep: {name} has no values; give at least one")
        if len(set(vals)) != len(vals):
            raise ValueError(f"sweep: {name} repeats a value in {vals}")
        for v in vals:
            if isinstance(v, bool) or not isinstance(v, int | float | np.floating | np.integer):
                raise ValueError(f"sweep: {name}={v!r} is not a number")
            try:
                dataclasses.replace(config, **{name: float(v)})
            except ValueError as e:
                raise ValueError(f"sweep: {name}={v}: {e}") from None
    names = tuple(values)
    combos = grid({n: [float(v) for v in vals] for n, vals in values.items()})
    return Sweep(names, tuple(tuple(c[n] for n in names) for c in combos))


def sweep_configs(config, sweep: Sweep) -> list:
    """The concrete config of each configuration of `sweep` (each checked as any config is)."""
    return [dataclasses.replace(config, **values) for values in sweep.as_dicts()]


def with_hparams(agent: Agent, hparams: Mapping[str, Any]) -> Agent:
    """A shallow copy of `agent` whose config holds `hparams` ({field: scalar, traced or not})
    and whose networks' init and optimiser are built again from it (`setup`).

    The copied config skips the range checks (a tracer has no value to check); `check_sweep`
    checked the values before anything was traced."""
    config = copy.copy(agent.config)
    for name, value in hparams.items():
        object.__setattr__(config, name, value)
    swapped = copy.copy(agent)
    swapped.config = config
    swapped.setup()
    return swapped


@struct.dataclass
class SweepState:
    """A run of a sweep: the agent's runner and the hyperparameters it trains with."""

    runner: Any
    hparams: dict[str, jax.Array]  # {name: float32 scalar} ([rows] when stacked)

    @property
    def update(self) -> jax.Array:
        return self.runner.update


class Swept(Agent):
    """`agent` run over the configurations of `sweep`: a stacked `SweepState` has one row per
    (configuration, seed), configuration-major (row = configuration * num_seeds + seed), and
    every `Agent` method (`update`, `run`, `jit_run`, `evaluate`, `precompile`) works on it as
    on a stacked runner of seeds, so `agents.loop.run_chunks` runs a sweep as one run.

    `jit_init()(keys)` takes the keys of one configuration's seeds, [num_seeds], and returns
    the [num_configs * num_seeds] rows: every configuration starts from the same seeds' keys,
    as its separate run would.
    """

    def __init__(self, agent: Agent, sweep: Sweep):
        self.__dict__.update(agent.__dict__)
        self.base = agent
        self.sweep = sweep
        self.name = agent.name
        self.config_type = agent.config_type
        self._jitted = {}
        self.progress = None

    def _agent(self, hparams) -> Agent:
        return with_hparams(self.base, hparams)

    def init(self, key: jax.Array, hparams=None) -> SweepState:
        hparams = self.sweep_row(0) if hparams is None else hparams
        return SweepState(self._agent(hparams).init(key), hparams)

    def sweep_row(self, config_index: int) -> dict[str, jax.Array]:
        return {n: jnp.float32(v) for n, v in self.sweep.as_dicts()[config_index].items()}

    def update(self, runner: SweepState):
        inner, metrics = self._agent(runner.hparams).update(runner.runner)
        return SweepState(inner, runner.hparams), metrics

    def policy(self, runner: SweepState, deterministic: bool = False):
        return self._agent(runner.hparams).policy(runner.runner, deterministic)

    def jit_init(self) -> Callable:
        if "init" not in self._jitted:
            table = self.sweep.arrays()
            configs = self.sweep.num_configs

            def init(keys):
                seeds = keys.shape[0]
                rows = {n: jnp.repeat(jnp.asarray(v), seeds) for n, v in table.items()}
                return jax.vmap(self.init)(jnp.tile(keys, configs), rows)

            opts = compiler_options("init", self.env)
            self._jitted["init"] = jax.jit(init, compiler_options=opts)
        return self._jitted["init"]

    def precompile(self, num_seeds, chunks=(), evaluate=False, run_seeds=None):
        """As `Agent.precompile`, `num_seeds` the seeds of one configuration."""
        keys = jax.ShapeDtypeStruct((num_seeds,), jax.random.key(0).dtype)
        init = self.jit_init()
        runner = jax.eval_shape(init, keys)
        rows = jax.ShapeDtypeStruct((num_seeds * self.sweep.num_configs,), keys.dtype)
        jobs = [(self.jit_run(n), (runner,)) for n in dict.fromkeys(chunks)]
        jobs.append((init, (keys,)))
        if evaluate:
            jobs.append((self.jit_evaluate(), (runner, rows)))
        for fn, args in jobs:
            fn.lower(*args).compile()

    def split(self, runner: SweepState, num_seeds: int) -> list:
        """The stacked rows -> one stacked runner of `num_seeds` seeds per configuration."""
        return [
            jax.tree.map(lambda x, c=c: x[c * num_seeds : (c + 1) * num_seeds], runner.runner)
            for c in range(self.sweep.num_configs)
        ]

    def join(self, runners: Sequence[Any]) -> SweepState:
        """One stacked runner of the same seeds per configuration (checkpoints) -> the rows."""
        seeds = int(np.shape(runners[0].update)[0])
        inner = jax.tree.map(lambda *xs: jnp.concatenate(xs), *runners)
        rows = {n: jnp.repeat(jnp.asarray(v), seeds) for n, v in self.sweep.arrays().items()}
        return SweepState(inner, rows)


def sweep_train(agent: Agent, sweep: Sweep) -> Callable[[jax.Array], tuple[Any, Any]]:
    """`train(key) -> (runner, Metrics)` of every configuration of `sweep` from the same `key`:
    leaves gain a leading [num_configs] axis. `jax.jit(jax.vmap(train))(keys)`: seeds too."""
    table = {n: jnp.asarray(v) for n, v in sweep.arrays().items()}

    def one(hparams, key):
        a = with_hparams(agent, hparams)
        return a.run(a.init(key), agent.config.num_updates)

    def train(key: jax.Array):
        return jax.vmap(one, in_axes=(0, None))(table, key)

    return train


def as_sweep(config, sweep) -> Sweep:
    """A `Sweep`, or {name: values} checked against `config` into one (`check_sweep`)."""
    return sweep if isinstance(sweep, Sweep) else check_sweep(config, sweep)


def train_fn(agent: Agent, sweep=None) -> Callable[[jax.Array], tuple[Any, Metrics]]:
    """`train(key) -> (final runner, Metrics[num_updates])`: a whole run of `agent` from `key`.

    `sweep` ({name: values} of float hyperparameters, or an `agents.sweep.Sweep`): every
    configuration of its grid from `key` in one program, leaves with a leading [num_configs]
    axis (`sweep_train`)."""
    if sweep is not None:
        return sweep_train(agent, as_sweep(agent.config, sweep))

    def train(key: jax.Array) -> tuple[Any, Metrics]:
        return agent.run(agent.init(key), agent.config.num_updates)

    return train
