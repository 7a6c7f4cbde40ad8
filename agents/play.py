"""Watch a trained agent: `python -m agents.play runs/cartpole` (deterministic episodes + a GIF).

Loads the run's checkpoint, runs the deterministic evaluation that `python -m agents.train` ran
at its end (`agents.loop.independent_evaluation`: same keys, same number of episodes, so the
returns reproduce its eval.json), prints
the returns, and writes a GIF of one episode (`--gif`, default DIR/episode.gif; never a folder
or a file of a run, refused before any work). The train
command calls `evaluate` and `film_episode` from here, so both run one piece of code.
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import os
import sys

import jax
import jax.numpy as jnp
import numpy as np

import jaxsim
from agents.agent import Agent
from agents.algorithms import agent_type
from agents.checkpoint import load_checkpoint
from agents.loop import MIN_EPISODES, evaluation_keys, independent_evaluation
from agents.train_args import check_flag, check_output_file


def evaluate(
    agent: Agent, runner, seed: int, num_seeds: int, min_episodes: int = MIN_EPISODES
) -> np.ndarray:
    """Deterministic returns of every seed's policy -> float32 [num_seeds, episodes]: the run's
    final evaluation, which also confirms a seed solved (`agents.loop.independent_evaluation`;
    episodes: `eval_envs` a batch, as many batches as make `min_episodes`)."""
    return independent_evaluation(agent, runner, seed, num_seeds, min_episodes)


def film_episode(
    agent: Agent,
    runner,
    seed: int,
    num_seeds: int,
    path: str,
    seed_index: int = 0,
    scale: float = 0.5,
) -> float:
    """Writes a GIF of evaluation episode 0 of seed `seed_index` (the first episode `evaluate`
    counts for it, batch 0); returns that episode's return.

    The evaluation rollout keeps observations, not states. Where the observation determines
    the state it shows (classic control), the frames are drawn from them
    (`jaxsim.rendering.states_from_obs`); elsewhere (Swarm: eight summary statistics of many
    particles) the episode is replayed from its first state with its recorded actions.
    """
    if not agent.env.renderable:  # before the evaluation rollout: nothing would draw it
        raise NotImplementedError(f"{agent.env.id}: this environment cannot draw itself")
    one = jax.tree.map(lambda x: x[seed_index], runner)
    c = agent.config
    key = evaluation_keys(seed, num_seeds)[seed_index]
    # As in evaluate: the same environments get the same resets (and params).
    traj = agent.evaluation_rollout(agent.policy(one, deterministic=True), key)
    params = agent.eval_params
    if agent.eval_params_sampler is not None:  # the values the first episodes drew
        start = jaxsim.initial_state(
            agent.env, key, c.eval_envs, params, params_sampler=agent.eval_params_sampler
        )
        params = params.replace(**start.episode_params)
    end = int(np.argmax(np.asarray(traj.done[:, 0])))
    try:
        obs = jnp.concatenate([traj.obs[: end + 1, 0], traj.next_obs[end, 0][None]])  # + terminal
        states = jaxsim.rendering.states_from_obs(agent.env, obs)
        states = [jax.tree.map(lambda x, t=t: x[t], states) for t in range(end + 2)]
    except NotImplementedError:
        actions = traj.action[: end + 1, 0]
        states = replay(agent.env, params, key, actions, c.eval_envs)
    jaxsim.render_gif(agent.env, states, path, params=params, scale=scale)
    return float(traj.episode_return[end, 0])


def replay(env, params, key, actions, num_envs: int) -> list:
    """Environment 0's states through `actions` [T, ...] in a rollout of `num_envs` from `key`:
    its first state (the rollout's, `jaxsim.initial_state`) and one per step, the terminal one
    last. For deterministic dynamics these are the states that rollout stepped through."""
    start = jaxsim.initial_state(env, key, num_envs, params).env_state
    axes = env.params_axes(params, num_envs, owner="play")
    params = jax.tree.map(lambda a, x: x if a is None else x[0], axes, params, is_leaf=_is_none)

    def step(state, action):
        state, _ = env.step(key, state, action, params)
        return state, state

    first = jax.tree.map(lambda x: x[0], start)
    _, later = jax.jit(lambda s, a: jax.lax.scan(step, s, a))(first, actions)
    return [first] + [jax.tree.map(lambda x, t=t: x[t], later) for t in range(len(actions))]


def _is_none(x) -> bool:
    return x is None


def try_film_episode(agent, runner, seed, num_seeds, path, **kwargs) -> str | None:
    """`film_episode`, or None with a line on stderr where Pillow is missing or the environment
    cannot be drawn (adapters): training never fails for want of a picture."""
    try:
        film_episode(agent, runner, seed, num_seeds, path, **kwargs)
    except (ImportError, NotImplementedError) as e:  # no Pillow, or an env nothing draws
        print(f"episode GIF skipped: {e}", file=sys.stderr)
        return None
    return path


def build_parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="python -m agents.play", description=__doc__.split("\n")[0])
    p.add_argument("run", help="a run folder of `python -m agents.train` (has checkpoint.msgpack)")
    p.add_argument(
        "--gif",
        default=None,
        help="the GIF to write (default RUN/episode.gif); a folder, or a file of a run, is refused",
    )
    p.add_argument("--no-gif", action="store_true", help="print the returns only")
    p.add_argument("--seed-index", type=int, default=0, help="which trained seed to film")
    p.add_argument("--scale", type=float, default=0.5, help="GIF frame size factor")
    p.add_argument(
        "--episodes",
        type=int,
        default=None,
        help="deterministic episodes per seed (default: as eval.json, the run's eval_envs a "
        f"batch, at least {MIN_EPISODES})",
    )
    return p


def main(argv: list[str] | None = None) -> dict:
    """Runs the command; returns {"returns": [num_seeds, episodes], "mean_return", "gif"}."""
    parser = build_parser()
    args = parser.parse_args(argv)
    if args.gif is not None and args.no_gif:
        parser.error("--gif and --no-gif: give one")
    own_gif = os.path.join(args.run, "episode.gif")
    if args.gif is not None:  # before any work: never a folder, never over a file of a run
        try:
            check_output_file("--gif", args.gif, args.run, own_gif)
        except ValueError as e:
            parser.error(str(e))
    ckpt_path = os.path.join(args.run, "checkpoint.msgpack")
    if not os.path.isfile(ckpt_path):
        parser.error(f"{args.run}: no checkpoint.msgpack there (train with python -m agents.train)")
    try:
        ckpt = load_checkpoint(ckpt_path)
    except ValueError as e:
        parser.error(str(e))
    # An explicit --gif is a request, refused before any work where it cannot be met.
    if args.gif is not None and not ckpt.env.renderable:
        parser.error(f"--gif {args.gif}: {ckpt.env.id} cannot draw itself; use --no-gif")
    runner, num_seeds = ckpt.runner, ckpt.meta["num_seeds"]
    if num_seeds is None:  # a single run's checkpoint: give it the seed axis
        runner, num_seeds = jax.tree.map(lambda x: x[None], runner), 1
    check_flag(parser, "--seed-index", args.seed_index, ge=0, lt=num_seeds, doc="the run's seeds")
    if args.episodes is not None:
        check_flag(parser, "--episodes", args.episodes, ge=1)
    check_flag(parser, "--scale", args.scale, float, gt=0)
    config, min_episodes = ckpt.config, MIN_EPISODES
    if args.episodes is not None:  # exactly that many, in one batch
        config, min_episodes = dataclasses.replace(config, eval_envs=args.episodes), 1
    agent = agent_type(ckpt.meta["algorithm"])(config, ckpt.env)
    seed = ckpt.meta.get("seed", 0)  # the run's --seed; runs before it was recorded used 0
    returns = evaluate(agent, runner, seed, num_seeds, min_episodes)
    per_seed = returns.mean(axis=1)
    name = f"[play {ckpt.env.id}]"
    for i, row in enumerate(returns):
        shown = ", ".join(f"{r:.1f}" for r in row[:10]) + (", ..." if len(row) > 10 else "")
        print(f"{name} seed {i}: mean {per_seed[i]:.1f} over {len(row)} episodes ({shown})")
    print(f"{name} mean return {per_seed.mean():.1f} ± {per_seed.std():.1f} over seeds")
    eval_path = os.path.join(args.run, "eval.json")
    if os.path.isfile(eval_path) and args.episodes is None:
        with open(eval_path) as f:
            recorded = json.load(f).get("mean_return")
        if recorded is not None:
            print(f"{name} the run's eval.json recorded {recorded:.1f}")
    gif = None
    if not args.no_gif:
        gif = args.gif or own_gif
        # The default GIF is skipped with a line where it cannot be drawn; an explicit one raises.
        film = film_episode if args.gif else try_film_episode
        filmed = film(
            agent, runner, seed, num_seeds, gif, seed_index=args.seed_index, scale=args.scale
        )
        gif = gif if args.gif else filmed
        if gif:
            print(f"{name} wrote {gif} (seed {args.seed_index}, episode 0)")
    return {"returns": returns, "mean_return": float(per_seed.mean()), "gif": gif}


if __name__ == "__main__":
    main()
