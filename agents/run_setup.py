"""What a training run and a sweep both check and build before they train, and the summary
they write after: the flags every run checks first, the environment of `--env` and `--param`,
the memory check, a resumed checkpoint (refused by name where a flag would change its result),
the target return, and eval.json's summary of the final evaluation. `agents.train` (one run)
and `agents.sweep_run` (one program per sweep) share them.
"""

from __future__ import annotations

import argparse
import os
from typing import Any

import jax
import jax.numpy as jnp
import numpy as np

import jaxsim
from agents.checkpoint import load_checkpoint, sampler_ranges
from agents.presets import env_overrides_for, target_for
from agents.train_args import (
    NO_TARGET,
    ParamFlag,
    check_flag,
    check_seed_flag,
    refuse_resume,
    resume_changes,
)


def check_run_flags(parser: argparse.ArgumentParser, args: argparse.Namespace) -> None:
    """The flags every training command checks first (a run or a sweep): parser.error, exit 2."""
    check_flag(parser, "--seeds", args.seeds, ge=1)
    check_flag(parser, "--checkpoint-every", args.checkpoint_every, ge=0)
    if args.seed is not None:
        check_seed_flag(parser, args.seed)
    if args.resume and args.overwrite:
        parser.error("--resume continues the run in --out, --overwrite replaces it: pass one")


def make_env(
    parser: argparse.ArgumentParser, env_id: str, flags: list[ParamFlag]
) -> tuple[jaxsim.Env, jaxsim.UniformParams | None]:
    """The run's environment (the preset's overrides, then the fixed `--param`s) and the
    sampler of the `--param` ranges; parser.error (exit 2) naming the flag that is wrong."""
    seen: dict[str, str] = {}
    for flag in flags:
        if flag.name in seen:
            parser.error(
                f"--param {flag.text}: {flag.name} is given twice (--param {seen[flag.name]})"
            )
        seen[flag.name] = flag.text
    base = env_overrides_for(env_id)
    fixed = [f for f in flags if not f.is_range]
    try:
        env = jaxsim.make(env_id, **{**base, **{f.name: f.value for f in fixed}})
    except (ValueError, TypeError) as e:
        if not fixed:
            raise
        jaxsim.make(env_id, **base)  # raises (and is reported) if the --env is what is wrong
        for flag in fixed:  # else the first --param that jaxsim.make refuses, by name
            refusal = _refusal(env_id, {**base, flag.name: flag.value})
            if refusal:
                parser.error(f"--param {flag.text}: {refusal}")
        parser.error(f"--param {' --param '.join(f.text for f in fixed)}: {e}")  # together
    ranges = {f.name: (f.low, f.high) for f in flags if f.is_range}
    for name, bounds in ranges.items():  # each alone first, so the error names its flag
        try:
            jaxsim.uniform_params(env, **{name: bounds})
        except (ValueError, TypeError) as e:
            parser.error(f"--param {seen[name]}: {e}")
    return env, jaxsim.uniform_params(env, **ranges) if ranges else None


def _refusal(env_id: str, overrides: dict) -> str | None:
    """What `jaxsim.make(env_id, **overrides)` objects to, or None."""
    try:
        jaxsim.make(env_id, **overrides)
    except (ValueError, TypeError) as e:
        return str(e)
    return None


def run_target(args: argparse.Namespace, ckpt) -> float | None:
    """The run's target return: --target-return, else the resumed run's, else the preset's."""
    if args.target_return == NO_TARGET:
        return None
    if args.target_return is not None:
        return args.target_return
    if ckpt is not None and "target_return" in ckpt.meta:
        return ckpt.meta["target_return"]
    return target_for(args.env, args.algorithm)


def load_for_resume(ckpt_path: str, args: argparse.Namespace, env: jaxsim.Env, config, sampler):
    """The checkpoint --resume continues; a ValueError naming every flag that would change its
    result (each with the run's value and the one given) if it is not a run of these flags.
    --seed and --target-return default to the run's; --checkpoint-every changes nothing."""
    if not os.path.exists(ckpt_path):
        raise ValueError(f"--resume: no checkpoint at {ckpt_path}")
    ckpt = load_checkpoint(ckpt_path)
    if ckpt.meta["algorithm"] != args.algorithm:
        raise ValueError(
            f"--resume: {ckpt_path} is a {ckpt.meta['algorithm']} run, not "
            f"{args.algorithm}; pass the same algorithm, or a new --out"
        )
    _check_same_env(ckpt_path, ckpt.env, env)
    changes = []
    ranges, asked_ranges = ckpt.meta.get("uniform_params"), sampler_ranges(sampler)
    if ranges != asked_ranges:
        changes.append(
            f"the --param ranges {_ranges_text(ranges)}, not {_ranges_text(asked_ranges)}"
        )
    saved = {"seeds": ckpt.meta["num_seeds"], **ckpt.config.to_dict()}
    asked = {"seeds": args.seeds, **config.to_dict()}
    if "devices" in ckpt.meta:  # a mesh changes float rounding
        saved["devices"], asked["devices"] = ckpt.meta["devices"], args.devices
    if args.target_return is not None and "target_return" in ckpt.meta:
        target = ckpt.meta["target_return"]
        saved["target_return"] = NO_TARGET if target is None else target
        asked["target_return"] = args.target_return
    changes += resume_changes(saved, asked)
    saved_seed = ckpt.meta.get("seed", 0)  # runs before the seed was recorded used 0
    if args.seed is not None and args.seed != saved_seed:
        changes.append(
            f"--seed {saved_seed}, not --seed {args.seed} (pass --seed {saved_seed}, or no --seed)"
        )
    refuse_resume(ckpt_path, changes)
    return ckpt


def _check_same_env(path: str, saved: jaxsim.Env, asked: jaxsim.Env) -> None:
    """--resume continues the same environment (id, static config and params overrides)."""
    if saved == asked:
        return
    was, now = saved.make_kwargs(), asked.make_kwargs()
    diffs = [] if saved.id == asked.id else [f"env {saved.id} -> {asked.id}"]
    diffs += [
        f"{k}: {was.get(k)} -> {now.get(k)}" for k in sorted(was | now) if was.get(k) != now.get(k)
    ]
    raise ValueError(
        f"--resume: {path} was trained on {saved!r}, not {asked!r} ({'; '.join(diffs)}); pass "
        "the same --env and --param NAME=VALUE flags, or a new --out"
    )


def _ranges_text(ranges: dict | None) -> str:
    if not ranges:
        return "(none)"
    return " ".join(f"{name}={low}:{high}" for name, (low, high) in ranges.items())


def check_memory(agent, num_seeds: int, film: bool) -> None:
    """A ValueError naming --num-envs or --eval-envs, with how many fit, where the run's
    rollouts would not fit in free memory: the training rollouts of every seed at once, the
    evaluations (`agent.evaluate`, every seed at once) and the filmed one (`play.film_episode`).
    The estimate is `jaxsim.rollout`'s own (`jaxsim.check_rollout`), made before any
    work; on a mesh, per device."""
    c, env = agent.config, agent.env
    devices = agent.mesh.shape[jaxsim.ENV_AXIS] if agent.mesh is not None else 1
    policy = _stand_in_policy(agent)
    train, evaluate = (c.num_steps, agent.env_params), (agent.eval_steps, agent.eval_params)
    evaluated = ("terminated", "truncated", "episode_return")  # what Agent.evaluate keeps
    # (flag, its value, seeds at once, (steps, params), outputs kept)
    rollouts = [
        ("--num-envs", c.num_envs, num_seeds, train, "all"),
        ("--eval-envs", c.eval_envs, num_seeds, evaluate, evaluated),
    ]
    if film:
        rollouts.append(("--eval-envs", c.eval_envs, 1, evaluate, "all"))
    for flag, asked, seeds, (steps, params), outputs in rollouts:
        training = flag == "--num-envs"

        def fits(n: int, seeds=seeds, steps=steps, params=params, outputs=outputs, given=training):
            envs = max(1, n * seeds // devices)
            try:
                jaxsim.check_rollout(
                    env, policy, steps, num_envs=envs, params=params, outputs=outputs,
                    state_given=given,
                )  # fmt: skip
            except MemoryError:
                return False
            return True

        if fits(asked):
            continue
        low, high = 0, asked  # fits(low) (or low is 0), not fits(high)
        while high - low > 1:
            mid = (low + high) // 2
            low, high = (mid, high) if fits(mid) else (low, mid)
        platform = jax.devices()[0].platform
        if not low and not training:  # the time limit is what does not fit
            raise ValueError(
                f"{env.id}'s time limit, {steps} steps (evaluation runs every episode to its "
                f"end): an evaluation rollout of even one environment does not fit in the memory "
                f"{platform} has free; pass --param max_episode_steps=N"
            )
        length = f"--num-steps {steps}" if training else f"{env.id}'s longest episode, {steps}"
        fit = f"at most {low} fit ({flag} {low} or less)" if low else "fewer --num-steps"
        raise ValueError(
            f"{flag} {asked}: the {'training' if training else 'evaluation'} rollouts "
            f"({length} steps of {asked} environments, x {seeds} seed(s) at once"
            f"{', split over the devices' if devices > 1 else ''}) do not fit in the memory "
            f"{platform} has free: {fit}"
        )


def _stand_in_policy(agent):
    """A policy with the agent's acting policy's outputs (action and extras, their shapes and
    dtypes), traced at once for any batch: what the memory estimate looks at."""
    space = agent.env.observation_space(agent.env.default_params)
    obs = jax.ShapeDtypeStruct((1, *space.shape), space.dtype)
    out = jax.eval_shape(lambda k, o: agent.policy(agent.init(k))(k, o), jax.random.key(0), obs)

    def policy(key, obs):
        def batch(x):
            return jnp.zeros((obs.shape[0], *x.shape[1:]), x.dtype)

        return jax.tree.map(batch, out)

    return policy


def evaluation_summary(
    env_id: str,
    config,
    returns: np.ndarray,
    done: int,
    target: float | None,
    solved: list[int | None],
    wall_time: float,
) -> dict[str, Any]:
    """eval.json of a run: the final evaluation's `returns` [num_seeds, episodes] after `done`
    updates, with each seed's solved flag and steps to `target` (None: no target, or never)."""
    per_seed = returns.mean(axis=1)
    return {
        "env": env_id,
        "deterministic": True,
        "episodes_per_seed": int(returns.shape[1]),
        "mean_return": float(per_seed.mean()),
        "std_return_over_seeds": float(per_seed.std()),
        "per_seed_mean_return": per_seed.tolist(),
        "steps_per_seed": done * config.steps_per_update,
        "target_return": target,
        # Per seed: solved means its stop check and the independent evaluation (these episodes,
        # keys apart from the stop check's) both reached the target (agents.loop.confirmed).
        "solved_per_seed": [u is not None for u in solved] if target is not None else None,
        # Per seed, the env steps at which it was solved (None: never).
        "steps_to_target_per_seed": [
            None if u is None else u * config.steps_per_update for u in solved
        ],
        "wall_time": wall_time,
    }
