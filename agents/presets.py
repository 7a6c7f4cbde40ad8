"""Per-algorithm, per-environment settings that solve the task; command-line flags override them.

Each preset states its source. Where it departs from the source (to run as a vectorised
rollout, or cheaper), the comment says how; the learning figures are in agents/README.md.
"""

from __future__ import annotations

from typing import Any

from agents.algorithms import agent_type

# PPO, CartPole-v1: rl-zoo's ppo.yml (8 envs x 32 steps, the batch of 256 as one minibatch,
# gamma 0.98, gae_lambda 0.8, ent_coef 0, lr annealed to 0 over 100k steps, the value loss
# unclipped as in SB3) with 10 epochs for its 20 and lr 2e-3 for its 1e-3; its clip range stays
# 0.2 (rl-zoo anneals it). Tuned for time to target, 6 seeds checked every 1024 steps: rl-zoo's
# settings solved (32 deterministic episodes >= 475) in 5k-31k steps (mean 14.3k), these in
# 2k-30k (mean 13.2k) at half the cost per update; 10 epochs at lr 1e-3 (mean 18.3k, up to 52k)
# and at 3e-3 (mean 17.1k), and 16 envs x 16 steps (mean 21.2k) did worse. The stop at 475
# (TARGETS) ends the run long before 100k; the purejaxrl settings (PPOConfig's defaults, 500k
# steps) needed ~86k steps per seed.
_PPO_CARTPOLE: dict[str, Any] = dict(
    total_steps=100_000,
    num_envs=8,
    num_steps=32,
    update_epochs=10,
    num_minibatches=1,
    learning_rate=2e-3,
    gamma=0.98,
    gae_lambda=0.8,
    ent_coef=0.0,
    clip_value=False,
    log_every=4,  # a stop check every 1024 steps per seed
)

# PPO, Pendulum-v1: no source stated when it was added (16 envs x 256 steps, 10 epochs of 16
# minibatches, lr 1e-3, gamma 0.95, observation and reward normalisation; rl-zoo's ppo.yml
# has 4 x 1024, gamma 0.9, gSDE). Its recorded run reached -200 in 66k-115k steps per seed
# (mean 98k), rl-zoo's 100k budget; the stop at -200 (TARGETS) ends it there, not at 1M.
_PPO_PENDULUM: dict[str, Any] = dict(
    total_steps=1_000_000,
    num_envs=16,
    num_steps=256,
    update_epochs=10,
    num_minibatches=16,
    learning_rate=1e-3,
    gamma=0.95,
    gae_lambda=0.95,
    ent_coef=0.0,
    clip_value=False,
    normalize_obs=True,
    scale_rewards=True,
    log_every=2,  # a stop check every 8192 steps per seed
)

# PPO, gymnax/Breakout-MinAtar: purejaxql's ppo_minatar.yaml sizes (4 epochs, 8 minibatches,
# annealed lr) with 16 envs x 64 steps (64 x 128 there) and lr 1e-3 (5e-3 there); the rest is
# PPOConfig's (a 64-64 tanh MLP on the flattened [10, 10, 4] observations, no conv net;
# ent_coef 0.01, 1e-4 there). Chosen for time to a confirmed 5 (the rejax_ppo_breakout peers
# case), 3 seeds, a stop check every 8,192 steps, on the 2-core CPU at load 4-7: these reached
# 5 on all seeds by 24.6k steps (19.6 s whole process; --seed 1's seeds too); the previous
# preset (64 envs, lr 5e-4) by 82k (40 s); 64 envs at lr 1e-3 and 2.5e-3 by 41k; 16 envs at
# the old lr 5e-4 by 49k, at 2.5e-3 by 24.6k (noisier compile); 8 envs at 1e-3 by 24.6k at
# half the steps/s; 16 envs with 4 minibatches by 49k. Over the whole 1M steps they also
# evaluate higher: 7.5 +- 0.7 (8.5, 7, 7) in 156 s against the previous preset's 6.3 +- 0.2 in
# 488 s (random 0.41).
_PPO_BREAKOUT: dict[str, Any] = dict(
    total_steps=1_000_000,
    num_envs=16,
    num_steps=64,
    update_epochs=4,
    num_minibatches=8,
    learning_rate=1e-3,
)

# DQN, CartPole-v1: rl-zoo's dqn.yml (the DQNConfig defaults: 50k steps, lr 2.3e-3, buffer
# 100k, batch 64, learning_starts 1000, 128 gradient steps per 256 env steps as 4 envs x 64
# steps, a target copy every 128 gradient steps, epsilon 1 -> 0.04 over 16% of the run, a
# 256-256 ReLU net) with the squared TD error (huber_delta 100, above any TD error here) for
# SB3's Huber loss, and a stop check every 2048 env steps. Solved within rl-zoo's 50k-step
# budget, as SB3 is, 9 seeds of 9 (--seed 0, 1, 2; each confirmed by 32 independent episodes,
# agents.loop.confirmed) at 2k-41k steps (mean 23.4k; SB3 14k-34k); with rl-zoo's Huber loss
# (delta 1) --seed 0's seeds needed 31k-41k (mean 34.1k). The previous preset, cleanrl's
# dqn.py with Polyak targets (500k steps, epsilon falling over 250k), needed 338k-494k steps:
# `--total-steps 500000 --num-envs 4 --num-steps 10 --gradient-steps 4 --batch-size 128
# --buffer-size 10000 --learning-starts 10000 --learning-rate 2.5e-4 --tau 0.01
# --target-update-every 1 --end-e 0.05 --exploration-fraction 0.5 --hidden 120,84`.
_DQN_CARTPOLE: dict[str, Any] = dict(
    huber_delta=100.0,
    log_every=8,  # a stop check every 2048 env steps per seed
)

# DQN, gymnax/Breakout-MinAtar: MinAtar's DQN (Young & Tian 2019: lr 2.5e-4, batch 32, replay
# starts at 5k, target copied every 1000 updates, epsilon 1 -> 0.1 over the first 100k frames, a
# gradient step every 4 frames in dopamine's MinAtar configs, Huber loss) with Adam instead of
# RMSProp, a 256-256 MLP instead of the conv net, a 50k buffer (100k there; ~3.2 kB per
# transition in float32), 200k steps as 4 envs x 8 steps and 8 gradient steps. Not tuned: its
# first run evaluated 8.5 (1 seed), then 8.66 over 3 seeds (random 0.41).
_DQN_BREAKOUT: dict[str, Any] = dict(
    total_steps=200_000,
    num_envs=4,
    num_steps=8,
    gradient_steps=8,
    batch_size=32,
    buffer_size=50_000,
    learning_starts=5_000,
    learning_rate=2.5e-4,
    target_update_every=1_000,
    end_e=0.1,
    exploration_fraction=0.5,
    log_every=250,
)

# SAC, MountainCarContinuous-v0: rl-zoo's sac.yml (50k steps, lr 3e-4, buffer 50k, batch 512,
# fixed ent_coef 0.1, train_freq = gradient_steps = 32, gamma 0.9999, tau 0.01, net [64, 64])
# without its gSDE exploration (use_sde, log_std_init -3.67), which agents/sac.py does not
# have, and with learning_starts 512 (rl-zoo: 0) so a minibatch fits in the buffer.
_SAC_MOUNTAINCAR: dict[str, Any] = dict(
    total_steps=50_000,
    num_envs=1,
    num_steps=32,
    gradient_steps=32,
    learning_rate=3e-4,
    buffer_size=50_000,
    batch_size=512,
    learning_starts=512,
    init_alpha=0.1,
    learn_alpha=False,
    gamma=0.9999,
    tau=0.01,
    hidden=(64, 64),
)

# SAC, brax/inverted_pendulum (issue 22, beside brax's SAC trainer in benchmarks/peers): the
# SACConfig defaults (rl-zoo's Pendulum-v1, SB3's SAC: lr 1e-3, tau 0.005, learning_starts
# 100, learned temperature) with 64-64 ReLU nets (256-256 there) and minibatches of 64 (256
# there; brax's SAC test's size) at one gradient step per env step as 4 envs x 16 steps and 64
# gradient steps, a stop check every 320 env steps. Chosen on the 2-core CPU by training time
# to a confirmed 1000 (compile in, checks out; benchmarks.harness.training.train_to_target), one
# seed per run, seed 0 unless named: the defaults' 8 gradient steps per 64 env steps evaluated
# ~70 after 16k steps; at UTD 1 with batch 256, 256-256 nets solved at 5,120 steps in 74.9 s
# (load 3.4), 64-64 ones at 8,320 in 42.0 s (load 3.0; 33.4 s at load 1.0; seed 1: 11,200 in
# 38.3 s, load 1.3); these (batch 64) at 17,600 in 27.5 s (load 1.1; seed 1: 13,760 in 36.5 s,
# load 3.3). Slower: batch 128 (18,240 steps, 49.8 s), 32 gradient steps (UTD 0.5: 22,720,
# 43.4 s), 8 envs x 8 steps with batch 256 (7,680, 37.4 s at load 2.7).
_SAC_BRAX_PENDULUM: dict[str, Any] = dict(
    total_steps=50_000,
    num_envs=4,
    num_steps=16,
    gradient_steps=64,
    buffer_size=50_000,
    batch_size=64,
    hidden=(64, 64),
    log_every=5,
)

# PPO, brax/inverted_pendulum (issue 22, beside brax's PPO trainer in benchmarks/peers): brax's
# published settings for it (gamma 0.97, 4 epochs, clip 0.3, entropy 0.01, observation
# normalisation, no gradient clipping) on 64-64 tanh nets, with smaller updates (256 envs x 32
# steps in 4 minibatches, brax's 2048 envs x 80 in 32), lr 1e-3 (3e-4) and a narrower first
# exploration (log std -1, std 0.37). Chosen on the 2-core CPU by training time to a confirmed
# 1000 (compile in, checks out; benchmarks.peers.brax_case.jaxsim_solve), one seed per run:
# brax's settings needed 1,966,080 steps (46.9 s); with lr 1e-3 and log std -1, 1,146,880
# (37.4 s); 512 envs x 32 steps in 8 minibatches, 114,688 (27.5 s); these 90,112, 368,640 and
# 114,688 steps for seeds 0, 1 and 2, in 15.9, 18.1 and 13.9 s (load ~1.5). Worse: 256-256
# nets (1,802,240 steps, 82 s), 32x4 nets (unsolved in 2M steps), reward scaling (1,966,080).
_PPO_BRAX_PENDULUM: dict[str, Any] = dict(
    total_steps=2_000_000,
    num_envs=256,
    num_steps=32,
    update_epochs=4,
    num_minibatches=4,
    learning_rate=1e-3,
    anneal_lr=False,
    gamma=0.97,
    gae_lambda=0.95,
    clip_eps=0.3,
    clip_value=False,
    ent_coef=0.01,
    vf_coef=0.5,
    max_grad_norm=1e9,  # brax's max_grad_norm=None: no clipping
    normalize_obs=True,
    init_log_std=-1.0,
    hidden=(64, 64),
    log_every=1,  # a stop check every 8,192 env steps
)

# PPO, the native MinAtar games (MinAtar/<Game>-v0 and -v1, the original's semantics: sticky
# actions 0.1, difficulty ramping): purejaxrl's ppo_minatar sizes (64 envs x 128 steps, 4
# epochs of 8 minibatches, lr 5e-3 annealed, ent_coef 0.01, gamma 0.99, lambda 0.95, 1e7
# steps) on PPOConfig's 64-64 tanh MLP over the flattened grid (purejaxrl: ReLU). A stop check
# (32 episodes of <= 2000 steps per seed) every 205k steps.
# Measured with the default command, 3 seeds, on the 2-core CPU (load ~2.5):
# `python -m agents.train ppo --env MinAtar/Breakout-v1 --seeds 3`: evaluation 30.8 +- 0.5
# (30.2, 30.9, 31.3), 3/3 solved (at 10.0M, 7.6M, 6.1M steps), 402 s whole process.
# With 5M steps (the lr annealed over 5M) the same command evaluated 24.9 +- 5.3; a 1-seed probe
# at a constant lr evaluated 28.5 at 5M and 30.6 at 10M. Variants that did worse: 2 epochs of 16
# minibatches (~1.3x the steps/s, stuck at 6-9 through 2.7M steps); MinAtar's conv net
# (network="cnn", 3x3 conv of 16, dense 128, lr 1e-3: ~7x slower per step on this CPU, 6.8 at
# 1.6M); 64 envs x 64 steps with 2 epochs of 2 and ent_coef 0.05 (17.5 +- 4.4 at 5M).
_PPO_MINATAR: dict[str, Any] = dict(
    total_steps=10_000_000,
    num_envs=64,
    num_steps=128,
    update_epochs=4,
    num_minibatches=8,
    learning_rate=5e-3,
    log_every=25,
)

# DQN, the native MinAtar games: the gymnax/Breakout-MinAtar preset above (MinAtar's DQN sizes,
# a 256-256 MLP, 200k steps). Not tuned on the native games.
_DQN_MINATAR: dict[str, Any] = dict(_DQN_BREAKOUT)

# PQN, the native MinAtar games: PureJaxQL's pqn_minatar.yaml (128 envs x 32 steps, 2 epochs of
# 32 minibatches, lr 5e-4 annealed, RAdam, gradient norm 10, lambda 0.65, epsilon 1 -> 0.05 over
# 10% of the run, 1e7 steps, no reward scaling) on PQNConfig's 256-256 LayerNorm MLP over the
# flattened grid, cast to float (PureJaxQL: a 3x3 conv of 16 and a dense 128, each LayerNorm'd).
# Progress (and a stop check, with --target-return) every 205k steps. Not tuned.
_PQN_MINATAR: dict[str, Any] = dict(
    total_steps=10_000_000,
    num_envs=128,
    num_steps=32,
    update_epochs=2,
    num_minibatches=32,
    learning_rate=5e-4,
    q_lambda=0.65,
    end_e=0.05,
    exploration_fraction=0.1,
    reward_scale=1.0,
    log_every=50,
)

# PQN, CartPole-v1: PureJaxQL's pqn_cartpole.yaml (the PQNConfig defaults: 500k steps, 4
# epochs, RAdam, lambda 0.95, rewards x 0.1, a 256-256 LayerNorm net) with 16 envs x 32 steps in
# 4 minibatches (32 x 64 in 16 there), lr 5e-4 annealed (1e-4) and epsilon 1 -> 0.05 over 10% of
# the run (-> 0.2 over 20%), a stop check every 4096 steps. Tuned for steps to a confirmed 475,
# 3 seeds per run (`--target-return 475`, 2-core CPU at load 3-7): PureJaxQL's settings solved
# at 82k-123k steps (checks every 41k; every 8k: 49k-90k, 40 s a run); 16 envs x 32 steps at
# lr 5e-4 with PureJaxQL's epsilon at 25k-41k (--seed 1: 12k-37k); these at 8k-53k over
# --seed 0, 1, 2 (mean 27.3k, 17-36 s a run). No better: lambda 0.65 (16k-57k, mean 26.4k),
# 128-128 nets, lr 1e-3 with 2 minibatches, 8 envs x 32 steps, a stop check every 2048 steps.
_PQN_CARTPOLE: dict[str, Any] = dict(
    num_envs=16,
    num_steps=32,
    num_minibatches=4,
    learning_rate=5e-4,
    end_e=0.05,
    exploration_fraction=0.1,
    log_every=8,  # a stop check every 4096 env steps per seed
)

# Recurrent PPO (GRU), CartPole-NoVel-v1 (positions only): PureJaxRL's PPO-RNN CartPole sizes
# (4 epochs, 4 minibatches of whole sequences, gamma 0.99, lambda 0.95, clip 0.2, ent_coef 0.01,
# lr annealed) with 16 envs x 64 steps (4 x 128 there), a 64-unit embedding, GRU and heads (128
# there) and lr 1e-3 (2.5e-4), for a 10-minute run on a 2-core CPU. Not tuned. Measured by
# `python -m benchmarks.micro.recurrent_ppo --parallel` (benchmarks/results/recurrent_cpu2_vm.json,
# 3 seeds in one jit, 2-core CPU at load 9-14): all 1M steps per seed in 432 s of training (+73 s
# compile), deterministic evaluation 500.0 +- 0.0 (32 episodes per seed); the MLP PPO with these
# settings, 42.7 +- 1.2.
_PPO_RNN_NOVEL: dict[str, Any] = dict(
    total_steps=1_000_000,
    num_envs=16,
    num_steps=64,
    update_epochs=4,
    num_minibatches=4,
    learning_rate=1e-3,
    hidden=(64, 64),
    gru_size=64,
    log_every=10,
)

MINATAR_GAMES = ("Asterix", "Breakout", "Freeway", "SpaceInvaders", "Seaquest")
MINATAR_IDS = tuple(f"MinAtar/{game}-{v}" for game in MINATAR_GAMES for v in ("v0", "v1"))

# `jaxsim.make` overrides an agent's run applies to an environment (saved in its checkpoint, so
# `agents.play` and `--resume` rebuild the same one). The original MinAtar has no time limit
# (Freeway ends itself after 2501 steps); a deterministic evaluation runs `max_episode_steps`
# steps and needs one, so the agents' MinAtar runs truncate at 2,000 steps (bootstrapping
# there): beyond the episodes of the targets here (a Breakout return of 30 takes ~400 steps),
# and as an evaluation runs all its steps, this bounds each stop check's cost. Freeway's 2501
# changes nothing in its episodes.
ENV_OVERRIDES: dict[str, dict[str, Any]] = {
    env_id: {"max_episode_steps": 2501 if "Freeway" in env_id else 2000} for env_id in MINATAR_IDS
}

PRESETS: dict[str, dict[str, dict[str, Any]]] = {
    "ppo": {
        "CartPole-v1": _PPO_CARTPOLE,
        "Pendulum-v1": _PPO_PENDULUM,
        "gymnax/Breakout-MinAtar": _PPO_BREAKOUT,
        "brax/inverted_pendulum": _PPO_BRAX_PENDULUM,
        **{env_id: _PPO_MINATAR for env_id in MINATAR_IDS},
    },
    "dqn": {
        "CartPole-v1": _DQN_CARTPOLE,
        "gymnax/Breakout-MinAtar": _DQN_BREAKOUT,
        **{env_id: _DQN_MINATAR for env_id in MINATAR_IDS},
    },
    "ppo_rnn": {"CartPole-NoVel-v1": _PPO_RNN_NOVEL},
    "pqn": {
        "CartPole-v1": _PQN_CARTPOLE,
        **{env_id: _PQN_MINATAR for env_id in MINATAR_IDS},
    },
    # rl-zoo's sac.yml Pendulum-v1 (the SACConfig defaults).
    "sac": {
        "Pendulum-v1": {},
        "MountainCarContinuous-v0": _SAC_MOUNTAINCAR,
        "brax/inverted_pendulum": _SAC_BRAX_PENDULUM,
    },
}


# The evaluation return at which `agents.train` stops a seed (mean of the deterministic
# evaluation's `eval_envs` episodes, checked every `log_every` updates; `--target-return`
# overrides, `--target-return none` trains the whole budget). CartPole-v1: Gymnasium's
# reward_threshold; Pendulum-v1 has none, -200 is the usual "solved" (rl-zoo's PPO reaches ~-200).
TARGETS: dict[str, dict[str, float]] = {
    "ppo": {
        "CartPole-v1": 475.0,
        "Pendulum-v1": -200.0,
        # issue 21's targets (gymnax-blines' PPO scores 28 on gymnax's Breakout, without sticky
        # actions), for -v0 and -v1 alike.
        **{f"MinAtar/Breakout-{v}": 30.0 for v in ("v0", "v1")},
        **{f"MinAtar/SpaceInvaders-{v}": 100.0 for v in ("v0", "v1")},
        "brax/inverted_pendulum": 1000.0,
    },
    "dqn": {"CartPole-v1": 475.0},
    "pqn": {"CartPole-v1": 475.0},
    "ppo_rnn": {"CartPole-NoVel-v1": 475.0},
    # brax's inverted_pendulum pays 1 per step upright over 1000-step episodes: 1000 is the most.
    "sac": {"brax/inverted_pendulum": 1000.0},
}


def target_for(env_id: str, algorithm: str = "ppo") -> float | None:
    """The return at which `algorithm`'s preset for `env_id` stops, or None (train the budget)."""
    return TARGETS.get(algorithm, {}).get(env_id)


def env_overrides_for(env_id: str) -> dict[str, Any]:
    """The `jaxsim.make` overrides an agent's run on `env_id` applies (`ENV_OVERRIDES`)."""
    return dict(ENV_OVERRIDES.get(env_id, {}))


def config_for(env_id: str, algorithm: str = "ppo", **overrides):
    """`algorithm`'s preset for `env_id` (its config defaults if none) with `overrides` applied."""
    config_type = agent_type(algorithm).config_type
    return config_type(**{**PRESETS[algorithm].get(env_id, {}), **overrides})
