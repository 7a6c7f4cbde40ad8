"""The brax case: jaxsim's PPO on `brax/<env>` beside brax's own PPO trainer, at brax's settings.

jaxsim's side runs here (jaxsim's venv); brax's trainer runs in its own venv
(`benchmarks/peers/peer_brax.py`), since brax 0.14's trainers need a jax older than jaxsim's.
Equal hyperparameters: brax's published settings mapped onto `PPOConfig` (`equal_config`): the
same envs, env steps per update (num_envs x unroll_length x batches per env), epochs,
minibatches of the same size, discount, GAE lambda, learning rate (not annealed), entropy cost,
clip range, value coefficient, no gradient clipping, observation normalisation; both sides'
networks are jaxsim's (a 64-64 tanh MLP each for policy and value), brax's set to it. What
stays different: brax scales rewards by a constant (`reward_scaling`), jaxsim does not; brax
computes GAE per 5-step unroll, jaxsim per 80-step rollout.
"""

from __future__ import annotations

import functools
import os
import statistics
import time
from typing import Any

import jax
import numpy as np

import jaxsim
from agents.agent import compiler_options
from agents.ppo import PPO, PPOConfig
from agents.presets import PRESETS, config_for
from benchmarks.harness.timing import CompileWatcher
from benchmarks.harness.training import train_to_target, training_compile_s
from benchmarks.peers.brax_settings import PUBLISHED

TARGETS = {"inverted_pendulum": 1000.0}  # evaluation return the time-to-score runs stop at


def published(env: str, shrink: int = 1) -> dict[str, Any]:
    """brax's published settings for `env`, its envs and batch divided by `shrink` (smoke runs
    only: the same unroll and minibatches, so the same steps per env per update)."""
    p = dict(PUBLISHED[env])
    p["num_envs"] //= shrink
    p["batch_size"] //= shrink
    return p


def steps_per_update(env: str, shrink: int = 1) -> int:
    """Env steps brax's trainer takes per training step (batch x minibatches x unroll)."""
    p = published(env, shrink)
    return p["batch_size"] * p["num_minibatches"] * p["unroll_length"]


def equal_config(env: str, shrink: int = 1, **overrides) -> PPOConfig:
    """brax's published settings for `env` as a jaxsim `PPOConfig` (see the module docstring);
    `shrink` as in `published`."""
    p = published(env, shrink)
    fields: dict[str, Any] = dict(
        total_steps=p["num_timesteps"],
        num_envs=p["num_envs"],
        num_steps=steps_per_update(env, shrink) // p["num_envs"],
        update_epochs=p["num_updates_per_batch"],
        num_minibatches=p["num_minibatches"],
        learning_rate=p["learning_rate"],
        anneal_lr=False,
        gamma=p["discounting"],
        gae_lambda=0.95,
        clip_eps=0.3,
        clip_value=False,
        ent_coef=p["entropy_cost"],
        vf_coef=0.5,
        max_grad_norm=1e9,  # brax's max_grad_norm=None: no clipping
        normalize_obs=True,
        hidden=(64, 64),
        eval_envs=32,
        log_every=1,
    )
    return PPOConfig(**{**fields, **overrides})


def jaxsim_speed(env: str, chunk: int, repeats: int, shrink: int = 1) -> dict[str, Any]:
    """Training env-steps/s of jaxsim's loop (`Agent.jit_run`, one seed) at `equal_config`:
    a first chunk of `chunk` updates compiles, then `repeats` timed chunks (their median)."""
    config = equal_config(env, shrink)
    agent = PPO(config, jaxsim.make(f"brax/{env}"))
    t0 = time.perf_counter()
    with CompileWatcher() as watch:
        runner = agent.jit_init()(jax.random.split(jax.random.key(0), 1))
        runner, _ = jax.block_until_ready(agent.jit_run(chunk)(runner))
    first_s = time.perf_counter() - t0
    walls, loads = [], []
    for _ in range(repeats):
        t = time.perf_counter()
        runner, _ = jax.block_until_ready(agent.jit_run(chunk)(runner))
        walls.append(time.perf_counter() - t)
        loads.append(os.getloadavg()[0])
    steps = chunk * config.steps_per_update
    return {
        "config": config.to_dict(),
        "batch_shrink": shrink,
        "env_steps_per_chunk": steps,
        "chunk_wall_s": walls,
        "sps": steps / statistics.median(walls),
        "compile_s": watch.seconds or 0.0,
        "first_chunk_s": first_s,
        "compiler_options": compiler_options(env=agent.env),
        "load": loads,
    }


def rollout_only_speed(env: str, repeats: int, **overrides) -> dict[str, Any]:
    """Env-steps/s of the environment alone inside jaxsim (`jaxsim.rollout`, uniform random
    actions, `equal_config`'s envs and steps per call, continuing across calls): set beside the
    loop's rate, it splits the loop's time into stepping and the rest (policy, GAE, updates)."""
    config = equal_config(env, **overrides)
    sim = jaxsim.make(f"brax/{env}")
    space = sim.action_space(sim.default_params)

    def policy(key, obs):
        shape = (obs.shape[0], *space.shape)
        return jax.random.uniform(key, shape, minval=space.low, maxval=space.high)

    # The agents' CPU compile options for this env (`agents.agent.compiler_options`: no YNNPACK
    # fusions for brax's), so this split of the loop's time compiles its stepping as the loop does.
    @functools.partial(jax.jit, compiler_options=compiler_options(env=sim))
    def call(key, state):
        out = jaxsim.rollout(
            sim, policy, config.num_steps, key=key, state=state, outputs="rewards", backend="scan"
        )
        return out.final_state, out.reward.sum()

    t0 = time.perf_counter()
    first = jaxsim.rollout(sim, policy, 1, num_envs=config.num_envs, backend="scan")
    state, _ = jax.block_until_ready(call(jax.random.key(1), first.final_state))
    first_s, walls = time.perf_counter() - t0, []
    for i in range(repeats):
        t = time.perf_counter()
        state, _ = jax.block_until_ready(call(jax.random.key(2 + i), state))
        walls.append(time.perf_counter() - t)
    return {
        "env_steps_per_call": config.num_envs * config.num_steps,
        "call_wall_s": walls,
        "sps": config.num_envs * config.num_steps / statistics.median(walls),
        "first_call_s": first_s,
        "compiler_options": compiler_options(env=sim),
        "load": os.getloadavg()[0],
    }


def jaxsim_solve(env: str, seed: int = 0, **overrides) -> dict[str, Any]:
    """jaxsim's train loop (`run_chunks`, a stop check after every update, confirmed by an
    independent 32-episode evaluation) until `TARGETS[env]`; training time excludes the checks
    and includes the compile (reported apart), as brax's `training/walltime` does. jaxsim's
    side at its best settings, as brax's is at its own: the PPO preset for `brax/<env>`
    (`agents.presets`) where there is one, else brax's settings (`equal_config`)."""
    env_id = f"brax/{env}"
    preset = env_id in PRESETS["ppo"]
    config = config_for(env_id, **overrides) if preset else equal_config(env, **overrides)
    target = TARGETS[env]

    def point(report, step) -> dict[str, Any]:
        confirm = report.confirm_returns
        return {
            "eval_return": float(report.eval_returns[0]),
            "confirm_return": None if confirm is None else float(confirm[0]),
        }

    run = train_to_target(
        lambda: PPO(config, jaxsim.make(f"brax/{env}")),
        jax.random.split(jax.random.key(seed), 1),
        target,
        chunk=1,
        seed=seed,
        point=point,
    )
    solved, end = run.solved, run.end
    return {
        "config": config.to_dict(),
        "settings": f"jaxsim's PPO preset for {env_id}" if preset else "brax's (equal_config)",
        "seed": seed,
        "target": target,
        "solved": solved[0] is not None,
        "steps_to_target": None if solved[0] is None else solved[0] * config.steps_per_update,
        "train_wall_s_to_target": end["train_wall_s"] if solved[0] is not None else None,
        "train_wall_s": end["train_wall_s"],
        # The compiles inside the training time (the stop checks' are in check_wall_s), and
        # every compile of the run.
        "compile_s": training_compile_s(run.watch),
        "compile_s_with_checks": run.compile_s,
        "check_wall_s": run.check_wall_s,
        "curve": run.curve,
    }


def brax_solve_summary(result: dict[str, Any]) -> dict[str, Any]:
    """Time to the target from peer_brax's solve result: brax's training walltime (compile in
    its first epoch, evaluations out) at the evaluation that was confirmed."""
    at = result.get("at") or {}
    last = result["curve"][-1] if result.get("curve") else {}
    return {
        "solved": bool(result.get("solved")),
        "steps_to_target": at.get("step"),
        "train_wall_s_to_target": at.get("train_walltime_s"),
        "train_wall_s": last.get("train_walltime_s"),
        "best_eval_return": max((p["eval_return"] for p in result.get("curve", [])), default=None),
        "confirm_return": at.get("confirm_return"),
    }


def ratio(theirs: float | None, ours: float | None) -> float | None:
    """theirs / ours when both are positive numbers, else None."""
    if not theirs or not ours or not np.isfinite(theirs) or not np.isfinite(ours):
        return None
    return float(theirs) / float(ours)


def split_gap(loop: dict[str, Any], trainer: dict[str, Any], stepping: dict[str, Any]) -> dict:
    """jaxsim's loop / brax's trainer (env-steps/s) as the product of three ratios, from
    `measure.step_rows`' stepping alone:
      jax: brax's own step under jaxsim's jax / under the brax venv's (the version alone);
      stepping: jaxsim's rollout through its adapter / brax's own step, both under jaxsim's jax;
      loops: (jaxsim's loop / its stepping) / (brax's trainer / its stepping): what each loop
        keeps of its stepping rate (policy, GAE, updates, resets)."""
    theirs, here = stepping["brax_own_jax"]["sps"], stepping["brax_jaxsim_jax"]["sps"]
    ours = stepping["jaxsim"]["sps"]
    return {
        "jax": ratio(here, theirs),
        "stepping": ratio(ours, here),
        "loops": ratio(loop["sps"] / ours, trainer["steady_sps"] / theirs),
    }


# brax's SAC side (peer_brax.py `sac-solve`): its settings' name in brax_settings.SAC_SETTINGS (brax
# publishes none for inverted_pendulum) and, in smoke runs, a budget of two training steps. Its
# SAC test's settings ("test": 64 envs, batch 64, 64 updates per step, lr 3e-4, discount 0.99)
# are brax's best of the two it has: seed 0 was confirmed at 20,480 steps after 140 s of
# training (load 8), its notebook's hopper settings ("notebook") at 45,056 after 315 s (load 6).
BRAX_SAC_SETTINGS = "test"
BRAX_SAC_SMOKE = ("--num-timesteps", "128", "--num-evals", "2")
SAC_SMOKE_STEPS = 2048  # jaxsim's SAC budget in smoke runs


def brax_sac_args(seed: int, target: float, smoke: bool) -> list[str]:
    """peer_brax.py's arguments for one seed of brax's SAC to `target` on inverted_pendulum."""
    args = ["sac-solve", "--env", "inverted_pendulum", "--sac-settings", BRAX_SAC_SETTINGS]
    args += ["--seed", str(seed), "--target", str(target)]
    return args + (list(BRAX_SAC_SMOKE) if smoke else [])


def brax_sac_summary(runs: list[dict[str, Any]]) -> dict[str, Any]:
    """Per seed (one brax process each): solved by the rule and its `brax_solve_summary`; the
    mean training time to the target when every seed solved."""
    per_seed = [brax_solve_summary(r) for r in runs]
    solved = [s["solved"] for s in per_seed]
    walls = [s["train_wall_s_to_target"] for s in per_seed]
    return {
        "solved_per_seed": solved,
        "solved_all": all(solved),
        "train_wall_s_to_target_per_seed": walls,
        "train_wall_s_per_seed": statistics.mean(walls) if solved and all(solved) else None,
        "steps_to_target_per_seed": [s["steps_to_target"] for s in per_seed],
        "best_eval_return_per_seed": [s["best_eval_return"] for s in per_seed],
        "seeds": len(runs),
    }
