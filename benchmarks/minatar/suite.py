"""The minatar suite: jaxsim's native MinAtar games beside gymnax's and the original package."""

from __future__ import annotations

from typing import Any

from benchmarks.harness.suite import Plan, Suite
from benchmarks.minatar.section import minatar_section
from benchmarks.report import schema as s


def args(p: Plan) -> list[str]:
    # The JAX baselines are gymnax (its own loop and jaxsim's adapter of it); the original
    # package is stepped through Gymnasium's SyncVectorEnv.
    # jaxsim's own rows beside the fresh scan loop (out= reuse, and the game without
    # observations: the bound) in full runs, the ones records are published from; the main
    # job's quick run keeps its few minutes.
    impls = ["reuse", "dynamics"] if p.mode == "full" else []
    impls += ["gymnax", "adapter"] if "gymnax" in p.baselines else []
    impls += ["original"] if "gymnasium_sync" in p.baselines else []
    impls += ["fused"] if p.on_gpu else []  # on a CPU the kernel is interpreted: tests only
    selected = ["--impls", ",".join(impls) or "none"]
    if p.mode == "smoke":
        return [*selected, *("--games Breakout --num-envs 8 --steps 4 --repeats 1 "
                "--original-envs 2 --original-steps 3 --original-repeats 1").split()]  # fmt: skip
    # Quick: Breakout, the game the adapters suite also measures; full runs play all five.
    return [*selected, *(["--quick", "--games", "Breakout"] if p.mode == "quick" else [])]


def problems(data: dict[str, Any]) -> list[str]:
    point = (("game", s.STR), ("impl", s.STR), ("num_envs", s.INT), ("status", s.STR))
    ok = (*s.TIMED, ("steps", s.INT), ("checks", s.DICT))
    return s.points(data, point, ok, (("reason", s.STR),))


SUITE = Suite(
    name="minatar",
    module="benchmarks.minatar.measure",
    title="MinAtar natively: jaxsim's five games beside gymnax, its adapter and the original",
    heading="## MinAtar: native games beside gymnax and the original",
    problems=problems,
    section=minatar_section,
    args=args,
)
