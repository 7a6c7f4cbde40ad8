"""SB3 PPO on jaxsim's CartPole (batched SB3 VecEnv) and on Gymnasium's (DummyVecEnv), side by side.

Usage:
  python -m benchmarks.micro.sb3_front             # 3 seeds x 100k steps each way (~5 min, 2 cores)
  python -m benchmarks.micro.sb3_front --quick     # 2 seeds x 30k steps (a pipeline check)
  python -m benchmarks.micro.sb3_front --seeds 5 --steps 100000 --out x.json

Both routes train Stable-Baselines3 PPO ("MlpPolicy", rl-baselines3-zoo's CartPole-v1 settings,
`benchmarks.baselines.ppo_sb3.sb3_cartpole_ppo`) for the same number of steps from the same seeds:
- "jaxsim": `jaxsim.gymnasium.make_sb3_vec_env("CartPole-v1", num_envs=8)`, one jitted step
  for the 8 environments, under SB3's `VecMonitor`;
- "gymnasium": SB3's usual `make_vec_env("CartPole-v1", n_envs=8)`, a `DummyVecEnv` of 8
  Gymnasium CartPoles, each under `Monitor`.
Each trained policy is then evaluated deterministically on its own route's single CartPole-v1
(`gymnasium.make("jaxsim/CartPole-v1")` or `gymnasium.make("CartPole-v1")`). Recorded per seed:
the evaluation return and the seconds `learn` took; per route: their medians. Runs alternate
between the routes, so load drifts hit both. The front's one-off compile is timed on its own
beforehand (`jaxsim_compile_s`), so `learn` is timed warm on both routes.
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time
from pathlib import Path

from benchmarks.baselines.ppo_sb3 import SB3_CARTPOLE, sb3_cartpole_ppo
from benchmarks.harness.arguments import count
from benchmarks.harness.formatting import format_table
from benchmarks.harness.provenance import provenance
from benchmarks.harness.record import default_out, finish

ROUTES = ("jaxsim", "gymnasium")


def train_and_evaluate(route: str, seed: int, steps: int, episodes: int) -> dict:
    """One seed of one route: seconds in `learn`, then the deterministic evaluation return."""
    import gymnasium as gym
    from stable_baselines3.common.env_util import make_vec_env
    from stable_baselines3.common.evaluation import evaluate_policy
    from stable_baselines3.common.monitor import Monitor
    from stable_baselines3.common.vec_env import VecMonitor

    import jaxsim.gymnasium

    n_envs = SB3_CARTPOLE["n_envs"]
    if route == "jaxsim":
        env = VecMonitor(jaxsim.gymnasium.make_sb3_vec_env("CartPole-v1", num_envs=n_envs))
        env.seed(seed)
        eval_env = Monitor(gym.make("jaxsim/CartPole-v1"))
    else:
        env = make_vec_env("CartPole-v1", n_envs=n_envs, seed=seed)
        eval_env = Monitor(gym.make("CartPole-v1"))
    eval_env.reset(seed=10_000 + seed)
    model = sb3_cartpole_ppo(env, seed)
    t0 = time.perf_counter()
    model.learn(total_timesteps=steps)
    train_s = time.perf_counter() - t0
    returns, lengths = evaluate_policy(
        model, eval_env, n_eval_episodes=episodes, deterministic=True, return_episode_rewards=True
    )
    env.close()
    eval_env.close()
    if len(returns) != episodes or model.num_timesteps < steps:
        raise AssertionError(f"{route} seed {seed}: {model.num_timesteps} steps, {returns}")
    return {
        "seed": seed,
        "steps": int(model.num_timesteps),
        "train_s": train_s,
        "steps_per_s": model.num_timesteps / train_s,
        "eval_mean_return": statistics.mean(returns),
        "eval_returns": [float(r) for r in returns],
        "eval_lengths": [int(x) for x in lengths],
    }


def compile_jaxsim_front() -> float:
    """Seconds to compile the front's reset and step for the batch, kept out of `train_s`.

    Compiled programs are shared by every vector env of the same environment and batch size,
    so the timed runs start warm; a user's first run pays this once per process.
    """
    import numpy as np

    import jaxsim.gymnasium

    t0 = time.perf_counter()
    env = jaxsim.gymnasium.make_sb3_vec_env("CartPole-v1", num_envs=SB3_CARTPOLE["n_envs"])
    env.reset()
    env.step(np.zeros(env.num_envs, np.int64))
    env.close()
    return time.perf_counter() - t0


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    p.add_argument("--quick", action="store_true", help="2 seeds x 30k steps")
    p.add_argument("--seeds", type=count, default=3)
    p.add_argument("--steps", type=count, default=SB3_CARTPOLE["n_timesteps"])
    p.add_argument("--eval-episodes", type=count, default=10)
    p.add_argument("--threads", type=int, default=1, help="torch intra-op threads (0: default)")
    p.add_argument("--out", type=Path, default=None, help="JSON output path")
    args = p.parse_args(argv)
    if args.quick:
        args.seeds, args.steps = 2, 30_000
    try:
        import stable_baselines3
        import torch
    except ImportError as e:
        print(f"skipped: Stable-Baselines3 and torch are needed ({e})", file=sys.stderr)
        return 1
    if args.threads > 0:
        # One thread: PPO's small MLP gains nothing from more, and the 2 cores are shared.
        torch.set_num_threads(args.threads)
    compile_s = compile_jaxsim_front()
    runs: dict[str, list[dict]] = {route: [] for route in ROUTES}
    for seed in range(args.seeds):
        for route in ROUTES:
            run = train_and_evaluate(route, seed, args.steps, args.eval_episodes)
            runs[route].append(run)
            print(
                f"{route:9s} seed {seed}: return {run['eval_mean_return']:.1f}, "
                f"{run['train_s']:.1f} s in learn",
                flush=True,
            )
    summary = {
        route: {
            "median_eval_return": statistics.median(r["eval_mean_return"] for r in rs),
            "median_train_s": statistics.median(r["train_s"] for r in rs),
            "median_steps_per_s": statistics.median(r["steps_per_s"] for r in rs),
        }
        for route, rs in runs.items()
    }
    ratio = summary["gymnasium"]["median_train_s"] / summary["jaxsim"]["median_train_s"]
    table = format_table(
        ["route", "median eval return", "median train s", "env-steps/s in learn"],
        [
            [
                route,
                f"{s['median_eval_return']:.1f}",
                f"{s['median_train_s']:.1f}",
                f"{s['median_steps_per_s']:.0f}",
            ]
            for route, s in summary.items()
        ],
    )
    print(table)
    print(f"train time, gymnasium / jaxsim: {ratio:.2f}x")
    record = {
        "benchmark": "sb3_front",
        "env_id": "CartPole-v1",
        "quick": args.quick,
        "provenance": provenance(["gymnasium", "stable-baselines3", "torch"]),
        "library": f"stable-baselines3 {stable_baselines3.__version__}, torch {torch.__version__}",
        "hyperparameters": "rl-baselines3-zoo ppo.yml CartPole-v1",
        "settings": SB3_CARTPOLE,
        "steps": args.steps,
        "seeds": args.seeds,
        "eval_episodes": args.eval_episodes,
        "torch_threads": torch.get_num_threads(),
        "jaxsim_compile_s": compile_s,
        "summary": summary,
        "train_s_gymnasium_over_jaxsim": ratio,
        "runs": runs,
        "table": table,
    }
    return finish(record, args.out or default_out("sb3_front", args.quick), "")


if __name__ == "__main__":
    sys.exit(main())
