"""examples/ppo_single_file.py: short, public API only, its GAE right, and it solves CartPole-v1."""

from __future__ import annotations

import ast
import sys
from pathlib import Path

import jax.numpy as jnp
import numpy as np
import pytest

import jaxsim

ROOT = Path(__file__).resolve().parents[1]
FILE = ROOT / "examples" / "ppo_single_file.py"

if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))  # `examples` imports as a namespace package from the root

from examples import ppo_single_file as ppo  # noqa: E402

THIRD_PARTY = {"jax", "jax.numpy", "optax", "flax", "flax.struct"}


def test_the_file_fits_in_300_lines_and_imports_only_public_api():
    source = FILE.read_text()
    assert len(source.splitlines()) <= 300
    tree = ast.parse(source)
    modules = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            modules |= {alias.name for alias in node.names}
        elif isinstance(node, ast.ImportFrom):
            assert node.level == 0, "a relative import"
            modules |= {node.module, *(f"{node.module}.{alias.name}" for alias in node.names)}
    jaxsim_imports = {m for m in modules if m.split(".")[0] == "jaxsim"}
    assert jaxsim_imports == {"jaxsim"}, "only `import jaxsim`: no jaxsim submodule"
    assert not {m for m in modules if m.split(".")[0] in ("agents", "benchmarks")}
    others = {m for m in modules - {"jaxsim"} if m.split(".")[0] not in sys.stdlib_module_names}
    assert others <= THIRD_PARTY, others - THIRD_PARTY
    used = {
        node.attr
        for node in ast.walk(tree)
        if isinstance(node, ast.Attribute)
        and isinstance(node.value, ast.Name)
        and node.value.id == "jaxsim"
    }
    assert "rollout" in used
    assert used <= set(jaxsim.__all__), used - set(jaxsim.__all__)  # nothing private


def test_gae_matches_a_python_loop_and_bootstraps_on_truncation_only():
    rng = np.random.default_rng(0)
    T, B, gamma, lam = 6, 3, 0.9, 0.7
    reward, value, next_value = (rng.normal(size=(T, B)).astype(np.float32) for _ in range(3))
    terminated = np.zeros((T, B), bool)
    truncated = np.zeros((T, B), bool)
    terminated[2, 0], truncated[3, 1], terminated[4, 2], truncated[4, 2] = True, True, True, True
    done = terminated | truncated
    advantage, target = ppo.gae(
        *map(jnp.asarray, (reward, value, next_value, terminated, done)), gamma, lam
    )
    expected = np.zeros((T, B), np.float32)
    for b in range(B):
        following = 0.0
        for t in reversed(range(T)):
            bootstrap = 0.0 if terminated[t, b] else gamma * next_value[t, b]
            delta = reward[t, b] + bootstrap - value[t, b]
            following = delta + (0.0 if done[t, b] else gamma * lam * following)
            expected[t, b] = following
    np.testing.assert_allclose(advantage, expected, rtol=1e-5, atol=1e-6)
    np.testing.assert_allclose(target, expected + value, rtol=1e-5, atol=1e-6)
    # the truncated step (3, 1) bootstraps from V(next_obs); the terminated step (2, 0) does not
    assert advantage[3, 1] == pytest.approx(reward[3, 1] + gamma * next_value[3, 1] - value[3, 1])
    assert advantage[2, 0] == pytest.approx(reward[2, 0] - value[2, 0])


@pytest.mark.parametrize(
    ("overrides", "named"),
    [
        ({"num_envs": 0}, "num_envs"),
        ({"update_epochs": 2.5}, "update_epochs"),
        ({"num_minibatches": 3}, "num_minibatches=3"),
        ({"total_steps": 100}, "total_steps=100"),
    ],
)
def test_a_bad_config_is_refused_naming_the_field(overrides, named):
    with pytest.raises(ValueError, match=named):
        ppo.Config(**overrides)


def test_a_continuous_env_is_refused_before_anything_compiles():
    with pytest.raises(ValueError, match="Discrete action space.*Pendulum-v1"):
        ppo.make_train(ppo.Config(env_id="Pendulum-v1"))


def test_the_default_config_solves_cartpole_on_two_seeds():
    # The default config: 100k steps per seed, both seeds in one vmapped jit; each seed's
    # greedy policy is then evaluated on 32 fresh environments from a key training never saw.
    returns, _, _ = ppo.train_and_evaluate(ppo.Config(), num_seeds=2, seed=0)
    assert returns.shape == (2, 32)
    assert np.all(returns.mean(axis=1) >= 475.0), returns.mean(axis=1)


def test_a_vmapped_init_reaches_no_lapack():
    # A LAPACK QR (flax's orthogonal init) under a vmapped init can deadlock XLA:CPU's pool
    # (docs/upstream_jaxlib_lapack_deadlock.md): the suite once hung here; jaxsim's init is
    # matmuls only.
    import jax

    def init(key):
        return ppo.init_actor_critic(key, 4, 2, 64)

    text = jax.jit(jax.vmap(init)).lower(jax.random.split(jax.random.key(0), 2)).as_text()
    assert "lapack" not in text.lower()
