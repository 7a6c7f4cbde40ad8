"""The Stable-Baselines3 side of `benchmarks.ppo`: PPO with rl-zoo's CartPole settings to a target.

"Solved" is judged as for jaxsim (`agents.loop`): every `eval_every` env steps, `episodes`
deterministic episodes, one on each of `episodes` vectorised environments (the stop check); when
their mean return reaches the target, the model is evaluated again, deterministically, for
`agents.loop.MIN_EPISODES` episodes on environments seeded apart from the check's, and training
stops only if that mean reaches it too (`agents.loop.confirmed`; SB3 keeps that model, as
StopTrainingOnRewardThreshold does). Both evaluations' time is taken out of training time.
`python -m benchmarks.baselines.ppo_sb3 --seed 0 --out r.json` trains one seed as a whole process
(what `benchmarks.ppo.process` times). SB3 and torch are optional (`pip install -e ".[baselines]"`);
without them the baseline is recorded as skipped with the reason.
"""

from __future__ import annotations

import os
import statistics
import time
from pathlib import Path

from agents.loop import MIN_EPISODES
from agents.presets import TARGETS as _PRESET_TARGETS
from benchmarks.harness.optional import install_hint
from benchmarks.harness.solved import CONFIRM_SEED_OFFSET, RULE, first_solved, judge, rejected_in

TARGETS = _PRESET_TARGETS["ppo"]  # where the train command stops: "solved" on both sides
# rl-baselines3-zoo's hyperparams/ppo.yml, CartPole-v1 (lin_x: linear decay from x to 0).
SB3_CARTPOLE = dict(
    n_envs=8,
    n_timesteps=100_000,
    n_steps=32,
    batch_size=256,
    gae_lambda=0.8,
    gamma=0.98,
    n_epochs=20,
    ent_coef=0.0,
    learning_rate=1e-3,
    clip_range=0.2,
)


def sb3_missing() -> str | None:
    """None if SB3, torch and Gymnasium import, else why not (with the install command)."""
    try:
        import gymnasium  # noqa: F401
        import stable_baselines3  # noqa: F401
        import torch  # noqa: F401
    except ImportError as e:
        return f"stable-baselines3, torch or gymnasium is not installed ({e}); " + install_hint(
            "stable_baselines3"
        )
    return None


def sb3_versions() -> str:
    import gymnasium
    import stable_baselines3
    import torch

    return (
        f"stable-baselines3 {stable_baselines3.__version__}, torch {torch.__version__}, "
        f"gymnasium {gymnasium.__version__}"
    )


def sb3_cartpole_ppo(env, seed: int):
    """SB3 PPO ("MlpPolicy", on the CPU) with rl-zoo's CartPole-v1 settings, on a `VecEnv`."""
    from stable_baselines3 import PPO

    h = SB3_CARTPOLE
    return PPO(
        "MlpPolicy",
        env,
        n_steps=h["n_steps"],
        batch_size=h["batch_size"],
        gae_lambda=h["gae_lambda"],
        gamma=h["gamma"],
        n_epochs=h["n_epochs"],
        ent_coef=h["ent_coef"],
        learning_rate=lambda p: p * h["learning_rate"],
        clip_range=lambda p: p * h["clip_range"],
        seed=seed,
        device="cpu",
        verbose=0,
    )


def eval_until_return(
    eval_env, every: int, episodes: int, target: float, started, confirm_env=None
):
    """An SB3 callback, EvalCallback-style: `episodes` deterministic evaluation episodes every
    `every` env steps (the stop check); one that reaches `target` is confirmed by
    `agents.loop.MIN_EPISODES` deterministic episodes on `confirm_env` (an env seeded apart from
    `eval_env`), and training stops only if both reach it (`benchmarks.harness.solved.judge`).

    `started` is (wall, CPU) at the start of training; each point of `callback.state["curve"]`
    has the step, the mean and std return, for a check at the target the confirmation's mean
    return and whether it solved the seed, and the wall and CPU training time so far with both
    evaluations' time taken out (`state["eval_s"]`, `state["eval_cpu_s"]`).
    """
    from stable_baselines3.common.callbacks import BaseCallback
    from stable_baselines3.common.evaluation import evaluate_policy

    if confirm_env is None:
        raise ValueError("eval_until_return: confirm_env is required (an env seeded apart)")
    t_start, cpu_start = started

    class EvalUntilReturn(BaseCallback):
        def __init__(self):
            super().__init__()
            self.state = {"eval_s": 0.0, "eval_cpu_s": 0.0, "next": every, "curve": []}

        def _on_step(self) -> bool:
            state = self.state
            if self.num_timesteps < state["next"]:
                return True
            state["next"] += every
            t0, cpu0 = time.perf_counter(), time.process_time()
            mean, std = evaluate_policy(self.model, eval_env, episodes, deterministic=True)
            point = {
                "step": self.num_timesteps,
                "mean_return": float(mean),
                "std_return": float(std),
            }
            if mean >= target:
                returns, _ = evaluate_policy(
                    self.model,
                    confirm_env,
                    MIN_EPISODES,
                    deterministic=True,
                    return_episode_rewards=True,
                )
                point.update(judge(float(mean), returns, target))
            now, cpu = time.perf_counter(), time.process_time()
            state["eval_s"] += now - t0
            state["eval_cpu_s"] += cpu - cpu0
            point["wall_s"] = now - t_start
            point["train_wall_s"] = now - t_start - state["eval_s"]
            point["train_cpu_s"] = cpu - cpu_start - state["eval_cpu_s"]
            state["curve"].append(point)
            return not point.get("solved", False)

    return EvalUntilReturn()


def gymnasium_vec_env(env_id: str, n_envs: int, seed: int):
    """SB3's own vector env of Gymnasium's `env_id` (DummyVecEnv, Monitor-wrapped)."""
    from stable_baselines3.common.env_util import make_vec_env

    return make_vec_env(env_id, n_envs=n_envs, seed=seed)


def envpool_vec_env(env_id: str, n_envs: int, seed: int):
    """EnvPool's `env_id` as an SB3 VecEnv (`benchmarks.baselines.envpool_vec`)."""
    from benchmarks.baselines.envpool_vec import envpool_vec_env as make

    return make(env_id, n_envs, seed)


VEC_ENVS = {"gymnasium": gymnasium_vec_env, "envpool": envpool_vec_env}
"""Simulator -> make(env_id, n_envs, seed): the VecEnv SB3 trains and evaluates on."""


def confirm_vec_env(env_id: str, seed: int, simulator: str = "gymnasium"):
    """The environments that confirm a check (`eval_until_return`): `MIN_EPISODES` of them, one
    episode each, seeded apart from the check's and the training ones'."""
    return VEC_ENVS[simulator](env_id, MIN_EPISODES, CONFIRM_SEED_OFFSET + seed)


def learn_sb3(
    seed: int,
    target: float,
    max_steps: int,
    eval_every: int,
    episodes: int,
    threads: int,
    simulator: str = "gymnasium",
) -> dict:
    """One seed of SB3's PPO to `target` on `simulator`'s CartPole-v1 (a key of VEC_ENVS): its
    training, stop-check and confirming environments all come from it."""
    import torch

    make = VEC_ENVS[simulator]
    default_threads = torch.get_num_threads()
    if threads > 0:
        torch.set_num_threads(threads)
    t_start, cpu_start = time.perf_counter(), time.process_time()
    env = make("CartPole-v1", SB3_CARTPOLE["n_envs"], seed)
    eval_env = make("CartPole-v1", episodes, 10_000 + seed)
    confirm_env = confirm_vec_env("CartPole-v1", seed, simulator)
    model = sb3_cartpole_ppo(env, seed)
    started = (t_start, cpu_start)
    callback = eval_until_return(eval_env, eval_every, episodes, target, started, confirm_env)
    model.learn(total_timesteps=max_steps, callback=callback)
    state = callback.state
    wall = time.perf_counter() - t_start
    reached = first_solved(state["curve"])
    used_threads = torch.get_num_threads()
    torch.set_num_threads(default_threads)
    for venv in (env, eval_env, confirm_env):
        venv.close()
    return {
        "seed": seed,
        "simulator": simulator,
        "loadavg_1min_after": os.getloadavg()[0],
        "torch_threads": used_threads,
        # Solved by the rule: its check and the independent evaluation reached the target.
        "reached": reached is not None,
        "solved": reached is not None,
        "confirm_return": None if reached is None else reached["confirm_return"],
        "confirm_episodes": MIN_EPISODES,
        "rejected_checks": rejected_in(state["curve"], seed),
        "steps_to_target": None if reached is None else reached["step"],
        "wall_s_to_target": None if reached is None else reached["wall_s"],
        "train_wall_s_to_target": None if reached is None else reached["train_wall_s"],
        "train_cpu_s_to_target": None if reached is None else reached["train_cpu_s"],
        "steps_done": int(model.num_timesteps),
        "check_wall_s": state["eval_s"],
        "sps_whole_loop": model.num_timesteps / (wall - state["eval_s"]),
        "curve": state["curve"],
    }


def sb3_baseline(seeds: int, max_steps: int, eval_every: int, episodes: int, threads: int) -> dict:
    """`seeds` SB3 runs one after another (`threads` torch threads, 0: torch's default)."""
    if missing := sb3_missing():
        return {"skipped": missing}
    runs = [
        learn_sb3(s, TARGETS["CartPole-v1"], max_steps, eval_every, episodes, threads)
        for s in range(seeds)
    ]
    reached = [r for r in runs if r["reached"]]
    times = [r["train_wall_s_to_target"] for r in reached]
    cpu_times = [r["train_cpu_s_to_target"] for r in reached]
    return {
        "torch_threads": runs[0]["torch_threads"],
        "median_train_wall_s_to_target": statistics.median(times) if times else None,
        "library": sb3_versions(),
        "env": "Gymnasium CartPole-v1",
        "hyperparameters": "rl-baselines3-zoo ppo.yml CartPole-v1",
        "settings": SB3_CARTPOLE,
        "eval_episodes": episodes,
        "eval_every_steps": eval_every,
        "solved_rule": RULE,
        "solved_per_seed": [r["solved"] for r in runs],
        "max_steps": max_steps,
        "seeds_reached": len(reached),
        "mean_train_wall_s_to_target": statistics.mean(times) if times else None,
        "total_train_wall_s_to_target": sum(times) if len(times) == seeds else None,
        "mean_train_cpu_s_to_target": statistics.mean(cpu_times) if cpu_times else None,
        "mean_steps_to_target": statistics.mean(r["steps_to_target"] for r in reached)
        if reached
        else None,
        "mean_sps_whole_loop": statistics.mean(r["sps_whole_loop"] for r in runs),
        "runs": runs,
    }


def sb3_process(seed: int, threads: int, out, simulator: str = "gymnasium") -> dict:
    """One seed as a whole process (`main`), timed from start to exit (imports in), beside its
    own account of solving: what `benchmarks.ppo.process` and `benchmarks.decoupled` time."""
    import json
    import sys

    from benchmarks.harness.timing import time_process

    cmd = [sys.executable, "-m", "benchmarks.baselines.ppo_sb3", "--seed", str(seed)]
    cmd += ["--simulator", simulator, "--threads", str(threads), "--out", str(out)]
    run = time_process(cmd)
    result = json.loads(Path(out).read_text())
    return {
        "seed": seed,
        **run,
        "torch_threads": result["torch_threads"],
        "solved": bool(result["solved"]),  # confirmed, as for jaxsim
        "steps_to_target": result["steps_to_target"],
        "confirm_return": result["confirm_return"],
        "rejected_checks": result["rejected_checks"],
        "check_wall_s": result["check_wall_s"],
        "train_wall_s_to_target": result["train_wall_s_to_target"],
    }


def main(argv: list[str] | None = None) -> int:
    """One seed as a whole process; writes its result (`learn_sb3`'s dict) to --out."""
    import argparse
    import json

    from atomicfiles import write_json_atomic

    p = argparse.ArgumentParser(
        prog="python -m benchmarks.baselines.ppo_sb3", description=main.__doc__
    )
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--threads", type=int, default=0, help="torch threads (0: torch's default)")
    p.add_argument("--max-steps", type=int, default=SB3_CARTPOLE["n_timesteps"])
    p.add_argument("--eval-every", type=int, default=1024, help="env steps between checks")
    p.add_argument("--episodes", type=int, default=32, help="episodes per check")
    p.add_argument(
        "--simulator", choices=list(VEC_ENVS), default="gymnasium", help="whose CartPole-v1"
    )
    p.add_argument("--out", required=True, help="result JSON")
    a = p.parse_args(argv)
    target = TARGETS["CartPole-v1"]
    run = learn_sb3(a.seed, target, a.max_steps, a.eval_every, a.episodes, a.threads, a.simulator)
    write_json_atomic(a.out, json.loads(json.dumps(run)))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
