"""From compiled HLO to phases: a fusion's innermost named scope, and fusions split by cost."""

import pytest

from jaxsim.profiler import (
    UNSCOPED,
)
from jaxsim.profiler._hlo import HloModule, PhaseMap, scope_phases

# ------------------------------------------------------------------------------- HLO -> phases
_PHASES = frozenset({"rollout", "policy", "env_step", "loss", "backward"})


def test_innermost_phase_of_a_scope_path():
    assert scope_phases("jit(f)/rollout/while/body/policy/dot_general", _PHASES) == [
        ("policy", "rollout", "jit(f)/rollout/while/body/policy")
    ]
    # The backward pass of `loss` runs under `backward`; transpose(jvp()) is not a phase.
    assert scope_phases("jit(t)/backward/transpose(jvp())/mul", _PHASES)[0][0] == "backward"
    # The last part names the primitive, never a phase; no phase on the path -> unscoped.
    assert scope_phases("jit(f)/policy", _PHASES)[0][0] == UNSCOPED
    assert scope_phases("", _PHASES)[0][0] == UNSCOPED
    # XLA joins the op_names of merged ops with ';'.
    merged = scope_phases("jit(f)/policy/add;jit(f)/env_step/add", _PHASES)
    assert [m[0] for m in merged] == ["policy", "env_step"]


_HLO = """HloModule jit_f, entry_computation_layout={(f32[64,64]{1,0})->f32[64,64]{1,0}}

%fused_computation (p0: f32[64,64]) -> f32[64,64] {
  %p0 = f32[64,64]{1,0} parameter(0)
  %dot.1 = f32[64,64]{1,0} dot(%p0, %p0), lhs_contracting_dims={1}, rhs_contracting_dims={0}, metadata={op_name="jit(f)/policy/dot_general"}
  ROOT %tanh.1 = f32[64,64]{1,0} tanh(%dot.1), metadata={op_name="jit(f)/env_step/tanh"}
}

%body (t: (s32[], f32[64,64])) -> (s32[], f32[64,64]) {
  %t = (s32[], f32[64,64]{1,0}) parameter(0)
  %i = s32[] get-tuple-element(%t), index=0
  %x = f32[64,64]{1,0} get-tuple-element(%t), index=1
  %copy.3 = f32[64,64]{1,0} copy(%x)
  ROOT %r = (s32[], f32[64,64]{1,0}) tuple(%i, %copy.3)
}

ENTRY %main (x.1: f32[64,64]) -> f32[64,64] {
  %x.1 = f32[64,64]{1,0} parameter(0), metadata={op_name="x"}
  %fusion = f32[64,64]{1,0} fusion(%x.1), kind=kLoop, calls=%fused_computation, metadata={op_name="jit(f)/env_step/tanh"}
  %init = (s32[], f32[64,64]{1,0}) tuple(%x.1, %fusion)
  %while.1 = (s32[], f32[64,64]{1,0}) while(%init), condition=%body, body=%body, metadata={op_name="jit(f)/rollout/while"}, backend_config={"known_trip_count":{"n":"4"}}
  ROOT %out = f32[64,64]{1,0} get-tuple-element(%while.1), index=1
}
"""  # noqa: E501


def test_a_fusion_spanning_two_phases_is_split_by_cost():
    mod = HloModule(_HLO)
    assert mod.name == "jit_f" and "fusion" in mod and mod.instructions["while.1"].trip_count == 4
    pm = PhaseMap([_HLO], _PHASES)
    mix, instr = pm.lookup("jit_f", "fusion")
    assert instr.opcode == "fusion" and mix.estimated
    # 2 * 64^3 dot flops against 64^2 tanh elements: the dot's phase gets most of the time.
    assert mix.phases["policy"] > 0.7 and 0 < mix.phases["env_step"] < 0.3
    assert sum(mix.phases.values()) == pytest.approx(1.0)
    # A copy XLA inserted without metadata takes the scope of the loop it sits in.
    assert pm.lookup("jit_f", "copy.3")[0].phases == {"rollout": 1.0}
    # The while itself is a container: its own time goes to its own scope.
    assert pm.lookup("jit_f", "while.1")[0].phases == {"rollout": 1.0}
    # Ops of a module without HLO are unscoped, with the reason in the path.
    mix, instr = pm.lookup("jit_other", "fusion")
    assert instr is None and mix.phases == {UNSCOPED: 1.0}
