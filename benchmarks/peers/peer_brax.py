"""brax's own PPO and SAC trainers, and its environment stepped alone; prints one JSON result last.

Runs under the peer venv's python (`benchmarks/peers/setup_envs.sh brax`): it imports only brax,
jax and numpy, so it must not import anything from this repository. `step` also runs under
jaxsim's own venv (jax >= 0.10, where brax's trainers fail but its environments run): the two
runs show what the jax version alone does to brax's step (`measure.step_rows`).
  speed: brax's `training/sps` (env steps / training-epoch wall time, brax's own figure) per
         epoch; the first epoch holds the compile, the later ones are the steady rate.
  solve: train until brax's deterministic evaluation reaches the target, then confirm it with an
         independent deterministic evaluation (>= 32 episodes, keys apart from brax's); a
         confirmed seed stops the run (as jaxsim's loop does), an unconfirmed one trains on.
  sac-solve: the same with brax's SAC trainer (`SAC_SETTINGS`).
  step:  brax's environment alone, as its trainers step it, no learning: the floor under a
         trainer's rate (`step_speed`).
"""

from __future__ import annotations

import argparse
import functools
import json
import os
import sys
import time
from typing import ClassVar

T0 = time.perf_counter()

import jax  # noqa: E402
import numpy as np  # noqa: E402
from brax import envs  # noqa: E402
from brax.training import acting  # noqa: E402
from brax.training.agents.ppo import networks as ppo_networks  # noqa: E402
from brax.training.agents.ppo import train as ppo  # noqa: E402
from brax.training.agents.sac import train as sac  # noqa: E402
from brax_settings import PUBLISHED, SAC_SETTINGS  # noqa: E402 (its sibling: data only)

IMPORT_S = time.perf_counter() - T0

COMPILING_EPOCHS = 2  # see `speed`
MIN_EPISODES = 32  # as agents.loop.MIN_EPISODES: episodes of the confirming evaluation, at least


class _Solved(Exception):
    """Raised from brax's progress_fn to stop training once a seed is confirmed solved."""


def _load() -> float:
    return os.getloadavg()[0]


def hyperparameters(env: str, network: str, **overrides) -> dict:
    """brax's published settings for `env`, its networks brax's defaults ("brax") or jaxsim's
    PPO's (one 64-64 tanh MLP each for policy and value: "jaxsim")."""
    hp = dict(PUBLISHED[env], **overrides)
    if network == "jaxsim":
        hp["network_factory"] = functools.partial(
            ppo_networks.make_ppo_networks,
            policy_hidden_layer_sizes=(64, 64),
            value_hidden_layer_sizes=(64, 64),
            activation=jax.nn.tanh,
        )
    return hp


def env_steps_per_training_step(hp: dict) -> int:
    return hp["batch_size"] * hp["num_minibatches"] * hp["unroll_length"] * hp["action_repeat"]


def speed(env_name: str, network: str, epochs: int, steps_per_epoch: int, shrink: int) -> dict:
    """`epochs` training epochs of `steps_per_epoch` training steps each, no evaluations; the
    published envs and batch divided by `shrink` (smoke runs only)."""
    sizes = {k: PUBLISHED[env_name][k] // shrink for k in ("num_envs", "batch_size")}
    probe = hyperparameters(env_name, network, **sizes)
    per_step = env_steps_per_training_step(probe)
    hp = hyperparameters(
        env_name,
        network,
        num_timesteps=epochs * steps_per_epoch * per_step,
        num_evals=epochs + 1,
        **sizes,
    )
    points = []

    def progress(step, metrics):
        points.append(
            {
                "step": int(step),
                "sps": float(metrics["training/sps"]),
                "walltime": float(metrics["training/walltime"]),
                "load": _load(),
            }
        )

    t = time.perf_counter()
    ppo.train(
        environment=envs.get_environment(env_name), run_evals=False, progress_fn=progress, **hp
    )
    # brax's trainer compiles its epoch twice (the second call's inputs differ from the first's:
    # measured, both ~65 s on a 2-core VM, the third 3 s), so the steady rate is from epoch 3.
    steady = [p["sps"] for p in points[COMPILING_EPOCHS:]]
    first_s = points[min(COMPILING_EPOCHS, len(points)) - 1]["walltime"]
    steady_epoch_s = steps_per_epoch * per_step / float(np.median(steady)) if steady else None
    return {
        "batch_shrink": shrink,
        "hyperparameters": _printable(hp),
        "env_steps_per_training_step": per_step,
        "epochs": points,
        "steady_sps": float(np.median(steady)) if steady else None,
        # The compiling epochs' time beyond steady ones': brax's compiles (and first-run costs).
        "compile_s": first_s - COMPILING_EPOCHS * steady_epoch_s if steady_epoch_s else None,
        "process_train_s": time.perf_counter() - t,
    }


CONFIRM_EPISODES = max(MIN_EPISODES, 64)
_EVALUATOR = acting.Evaluator  # brax's own: sac_solve swaps in _CapturingEvaluator to train


def _progress_to_target(env, hp: dict, target: float, seed: int, policy_and_params, echo=False):
    """brax's `progress_fn` for a run to `target` -> (progress, curve, result): each evaluation
    is a point of `curve`; one at the target is confirmed by an independent deterministic
    evaluation (CONFIRM_EPISODES episodes, keys apart from brax's evaluator, which draws from
    `seed`) of `policy_and_params()` -> (policy_fn, params), and a confirmed one ends the run
    (`_Solved`, with `result` holding it). `echo`: each point also goes to stderr."""
    confirm_env = envs.training.wrap(env, episode_length=hp["episode_length"])
    curve, result = [], {"solved": False}
    t_start = time.perf_counter()

    def progress(step, metrics):
        point = {
            "step": int(step),
            "eval_return": float(metrics["eval/episode_reward"]),
            "train_walltime_s": float(metrics.get("training/walltime", 0.0)),
            "wall_s": time.perf_counter() - t_start,
            "load": _load(),
        }
        if "training/sps" in metrics:
            point["sps"] = float(metrics["training/sps"])
        curve.append(point)
        if echo:
            print(f"[brax] {json.dumps(point)}", file=sys.stderr, flush=True)  # stdout: result
        if step == 0 or point["eval_return"] < target:
            return
        t = time.perf_counter()
        policy_fn, params = policy_and_params()
        evaluator = _EVALUATOR(
            confirm_env,
            policy_fn,
            num_eval_envs=CONFIRM_EPISODES,
            episode_length=hp["episode_length"],
            action_repeat=hp["action_repeat"],
            key=jax.random.PRNGKey(1_000_003 + seed),
        )
        returns = evaluator.run_evaluation(params, {})["eval/episode_reward"]
        point["confirm_return"] = float(returns)
        point["confirm_episodes"] = CONFIRM_EPISODES
        point["confirm_s"] = time.perf_counter() - t
        if float(returns) >= target:
            result.update(solved=True, at=point)
            raise _Solved

    return progress, curve, result


def solve(
    env_name: str,
    network: str,
    target: float,
    seed: int,
    num_timesteps: int | None,
    num_evals: int | None,
) -> dict:
    """brax's trainer at its published settings (deterministic evaluations) until the target."""
    overrides = {k: v for k, v in (("num_timesteps", num_timesteps), ("num_evals", num_evals)) if v}
    hp = hyperparameters(env_name, network, **overrides)
    env = envs.get_environment(env_name)
    latest = {}

    def keep(step, make_policy, params):
        latest.update(step=step, make_policy=make_policy, params=params)

    def policy_and_params():
        return functools.partial(latest["make_policy"], deterministic=True), latest["params"]

    progress, curve, result = _progress_to_target(env, hp, target, seed, policy_and_params)
    try:
        ppo.train(
            environment=env,
            seed=seed,
            deterministic_eval=True,
            progress_fn=progress,
            policy_params_fn=keep,
            **hp,
        )
    except _Solved:
        pass
    return {**result, "curve": curve, "hyperparameters": _printable(hp)}


class _CapturingEvaluator(acting.Evaluator):
    """brax's evaluator, keeping the policy it built and the parameters it last evaluated: brax's
    SAC trainer has no `policy_params_fn` (its PPO trainer's hook), so the confirming evaluation
    takes them from here."""

    latest: ClassVar[dict] = {}

    def __init__(self, eval_env, eval_policy_fn, *args, **kwargs):
        super().__init__(eval_env, eval_policy_fn, *args, **kwargs)
        _CapturingEvaluator.latest["policy_fn"] = eval_policy_fn

    def run_evaluation(self, policy_params, training_metrics, aggregate_episodes=True):
        _CapturingEvaluator.latest["params"] = policy_params
        return super().run_evaluation(policy_params, training_metrics, aggregate_episodes)


def sac_solve(
    env_name: str,
    settings: str,
    target: float,
    seed: int,
    num_timesteps: int | None,
    num_evals: int | None,
) -> dict:
    """brax's SAC trainer at `SAC_SETTINGS[settings]` (deterministic evaluations, brax's own
    256-256 networks) until the target, each reaching evaluation confirmed as `solve` does."""
    overrides = {k: v for k, v in (("num_timesteps", num_timesteps), ("num_evals", num_evals)) if v}
    hp = dict(SAC_SETTINGS[settings], **overrides)
    env = envs.get_environment(env_name)
    latest = _CapturingEvaluator.latest
    latest.clear()
    progress, curve, result = _progress_to_target(
        env, hp, target, seed, lambda: (latest["policy_fn"], latest["params"]), echo=True
    )

    acting.Evaluator = _CapturingEvaluator  # brax's SAC trainer builds `acting.Evaluator`
    try:
        sac.train(environment=env, seed=seed, deterministic_eval=True, progress_fn=progress, **hp)
    except _Solved:
        pass
    finally:
        acting.Evaluator = _EVALUATOR
    return {**result, "curve": curve, "settings": settings, "hyperparameters": _printable(hp)}


def step_speed(env_name: str, num_envs: int, steps: int, repeats: int, episode_length: int):
    """Env-steps/s of brax's environment alone: `envs.training.wrap` (its trainers' episode
    limit and auto-reset), uniform random actions, `steps` steps of `num_envs` envs per jitted
    call (a `lax.scan` keeping rewards and dones, as `measure.step_rows`' jaxsim rollout keeps
    rewards), each call continuing the last; after two warm-up calls, the median of `repeats`.
    XLA's default compile options."""
    env = envs.training.wrap(envs.get_environment(env_name), episode_length=episode_length)

    @jax.jit
    def call(state, key):
        def body(state, key):
            action = jax.random.uniform(key, (num_envs, env.action_size), minval=-1, maxval=1)
            state = env.step(state, action)
            return state, (state.reward, state.done)

        state, (reward, done) = jax.lax.scan(body, state, jax.random.split(key, steps))
        return state, reward.sum(), done.sum()

    state = jax.jit(env.reset)(jax.random.split(jax.random.PRNGKey(0), num_envs))
    # Two calls before timing: reset's state and a step's differ in type (weak types), so the
    # second call compiles again (~20 s for ant); the timed calls then take a call's own output.
    warmup = []
    for i in range(2):
        t = time.perf_counter()
        state, reward, _ = jax.block_until_ready(call(state, jax.random.PRNGKey(100 + i)))
        warmup.append(time.perf_counter() - t)
        if not np.isfinite(float(reward)):
            raise RuntimeError(f"{env_name}: non-finite rewards from brax's step")
    walls = []
    for i in range(repeats):
        t = time.perf_counter()
        state, _, _ = jax.block_until_ready(call(state, jax.random.PRNGKey(2 + i)))
        walls.append(time.perf_counter() - t)
    return {
        "num_envs": num_envs,
        "steps_per_call": steps,
        "call_wall_s": walls,
        "sps": num_envs * steps / float(np.median(walls)),
        "warmup_call_s": warmup,
    }


def _printable(hp: dict) -> dict:
    return {k: (v if isinstance(v, (int, float, str, bool)) else repr(v)) for k, v in hp.items()}


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__)
    p.add_argument("mode", choices=("speed", "solve", "sac-solve", "step"))
    p.add_argument("--env", default="inverted_pendulum", choices=sorted(PUBLISHED))
    p.add_argument("--network", default="jaxsim", choices=("jaxsim", "brax"))
    p.add_argument("--epochs", type=int, default=5, help="speed: epochs (2 compile)")
    p.add_argument("--steps-per-epoch", type=int, default=2, help="speed: training steps/epoch")
    p.add_argument("--shrink", type=int, default=1, help="speed: envs and batch / this (smoke)")
    p.add_argument("--sac-settings", default="notebook", choices=sorted(SAC_SETTINGS))
    p.add_argument("--target", type=float, default=1000.0)
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--num-timesteps", type=int, default=None, help="solve: budget (published)")
    p.add_argument("--num-evals", type=int, default=None, help="solve: evaluations (published)")
    p.add_argument("--num-envs", type=int, default=None, help="step: envs (published)")
    p.add_argument("--steps", type=int, default=16, help="step: steps per call")
    p.add_argument("--repeats", type=int, default=3, help="step: timed calls")
    p.add_argument("--episode-length", type=int, default=1000, help="step: the trainers' limit")
    a = p.parse_args()
    load_before = _load()
    if a.mode == "speed":
        out = speed(a.env, a.network, a.epochs, a.steps_per_epoch, a.shrink)
    elif a.mode == "step":
        num_envs = a.num_envs or PUBLISHED[a.env]["num_envs"]
        out = step_speed(a.env, num_envs, a.steps, a.repeats, a.episode_length)
    elif a.mode == "solve":
        out = solve(a.env, a.network, a.target, a.seed, a.num_timesteps, a.num_evals)
    else:
        out = sac_solve(a.env, a.sac_settings, a.target, a.seed, a.num_timesteps, a.num_evals)
    import brax

    out.update(
        mode=a.mode,
        env=a.env,
        # SAC: brax's own networks; stepping alone: none
        network={"sac-solve": "brax", "step": None}.get(a.mode, a.network),
        seed=a.seed,
        load_before=load_before,
        load_after=_load(),
        import_s=IMPORT_S,
        process_wall_s=time.perf_counter() - T0,
        versions={
            "jax": jax.__version__,
            "brax": brax.__version__,
            "python": sys.version.split()[0],
        },
    )
    if a.mode != "step":  # brax's trainers' settings; stepping alone has none
        out.setdefault("hyperparameters", _printable(hyperparameters(a.env, a.network)))
    print(json.dumps(out))


if __name__ == "__main__":
    main()
