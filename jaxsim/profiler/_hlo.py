"""Optimized HLO text -> for each instruction, the phases its work belongs to (by op_name scope)."""

from __future__ import annotations

import dataclasses
import functools
import math
import re
from collections import Counter
from collections.abc import Iterable

UNSCOPED = "(unscoped)"

# Relative cost of one elementwise output element, in dot/convolution flops. Used only to split
# the time of one executed kernel (a fusion, or a CPU "small call" holding a whole loop) between
# the phases of the instructions inside it; the report gives the share of time split this way.
ELEMENT_COST = 8.0
TRANSCENDENTAL_COST = 32.0
_TRANSCENDENTAL = {
    "exponential", "exponential-minus-one", "log", "log-plus-one", "tanh", "logistic", "sine",
    "cosine", "tan", "atan2", "power", "sqrt", "rsqrt", "cbrt", "erf",
}  # fmt: skip
_FREE = {
    "parameter", "constant", "tuple", "get-tuple-element", "bitcast", "after-all", "partition-id",
    "replica-id", "opt-barrier", "add-dependency", "domain", "get-dimension-size",
}  # fmt: skip
# Instructions that run other computations; their cost is their callees'.
_CALLERS = {"fusion", "call", "while", "conditional", "async-start", "async-done"}
# Control flow whose callees run as separately traced thunks (unless compiled as one kernel).
CONTAINERS = {"while", "conditional", "call"}

_COMP_RE = re.compile(r"^(?:ENTRY\s+)?%?([\w.\-]+)\s*\(.*\)\s*->.*\{\s*$")
_INSTR_RE = re.compile(r"^\s+(?:ROOT\s+)?%?([\w.\-]+)\s*=\s*(.*)$")
_OPNAME_RE = re.compile(r'op_name="((?:[^"\\]|\\.)*)"')
_CALLEE_RE = re.compile(
    r"\b(?:calls|to_apply|body|condition|true_computation|false_computation)=%?([\w.\-]+)"
)
_CALLEE_SET_RE = re.compile(r"\b(?:calls|branch_computations|called_computations)=\{([^}]*)\}")
_TRIP_RE = re.compile(r'"known_trip_count":\{"n":"(\d+)"\}')
_ARRAY_RE = re.compile(r"[a-z]+\d*\[([^\]]*)\]")
_SCALAR_RE = re.compile(r"[a-z]+\d*\[\](\{\})?")
_CONTRACT_RE = re.compile(r"lhs_contracting_dims=\{([\d,]*)\}")


@dataclasses.dataclass
class Instruction:
    name: str
    opcode: str
    shape: str
    operands: list[str]
    op_name: str
    callees: list[str]
    attrs: str
    computation: str

    @property
    def trip_count(self) -> int:
        m = _TRIP_RE.search(self.attrs)
        return int(m.group(1)) if m else 1

    @functools.cached_property
    def is_scalar(self) -> bool:
        """The output is a scalar (for overhead calibration: such ops do almost no work)."""
        return bool(_SCALAR_RE.fullmatch(self.shape.strip()))

    @property
    def is_container(self) -> bool:
        """Control flow whose body runs as its own (traced) kernels, not as one compiled call."""
        return self.opcode in CONTAINERS and 'xla_cpu_small_call="true"' not in self.attrs


def _match_paren(text: str, start: int) -> int:
    depth = 0
    for i in range(start, len(text)):
        if text[i] == "(":
            depth += 1
        elif text[i] == ")":
            depth -= 1
            if depth == 0:
                return i
    return len(text) - 1


def _split_top(text: str) -> list[str]:
    parts, depth, cur = [], 0, []
    for ch in text:
        if ch in "([{":
            depth += 1
        elif ch in ")]}":
            depth -= 1
        if ch == "," and depth == 0:
            parts.append("".join(cur))
            cur = []
        else:
            cur.append(ch)
    if cur:
        parts.append("".join(cur))
    return [p.strip() for p in parts if p.strip()]


def _parse_instruction(name: str, rest: str, computation: str) -> Instruction | None:
    if rest.startswith("("):
        end = _match_paren(rest, 0)
        shape, tail = rest[: end + 1], rest[end + 1 :].lstrip()
    else:
        shape, _, tail = rest.partition(" ")
    paren = tail.find("(")
    if paren <= 0:
        return None
    opcode = tail[:paren].strip()
    close = _match_paren(tail, paren)
    operands = [op.split()[-1].lstrip("%") for op in _split_top(tail[paren + 1 : close])]
    attrs = tail[close + 1 :]
    m = _OPNAME_RE.search(attrs)
    callees = _CALLEE_RE.findall(attrs)
    for group in _CALLEE_SET_RE.findall(attrs):
        callees += [c.strip().lstrip("%") for c in group.split(",") if c.strip()]
    return Instruction(
        name=name,
        opcode=opcode,
        shape=shape,
        operands=operands,
        op_name=m.group(1) if m else "",
        callees=callees,
        attrs=attrs,
        computation=computation,
    )


def _elements(shape: str) -> int:
    """Elements of an array shape; of a tuple shape, the sum over its arrays."""
    total = 0
    for dims in _ARRAY_RE.findall(shape):
        n = 1
        for d in dims.split(","):
            d = d.strip().lstrip("<=")
            if d:
                n *= int(d) if d.isdigit() else 1
        total += n
    return total


def _dims(shape: str) -> list[int]:
    m = _ARRAY_RE.search(shape)
    if not m:
        return []
    return [int(d.strip().lstrip("<=")) for d in m.group(1).split(",") if d.strip().isdigit()]


class HloModule:
    """One compiled module: its computations and instructions, parsed from `as_text()`."""

    def __init__(self, text: str):
        header = text.split("\n", 1)[0]
        m = re.match(r"HloModule\s+([\w.\-]+)", header)
        self.name = m.group(1) if m else ""
        self.computations: dict[str, list[Instruction]] = {}
        self.instructions: dict[str, Instruction] = {}
        current: list[Instruction] | None = None
        comp_name = ""
        for line in text.splitlines():
            if current is None:
                cm = _COMP_RE.match(line)
                if cm:
                    comp_name = cm.group(1)
                    current = self.computations.setdefault(comp_name, [])
                continue
            if line.startswith("}"):
                current = None
                continue
            im = _INSTR_RE.match(line)
            if im:
                instr = _parse_instruction(im.group(1), im.group(2), comp_name)
                if instr is not None:
                    current.append(instr)
                    self.instructions.setdefault(instr.name, instr)
        self._by_comp = {c: {i.name: i for i in instrs} for c, instrs in self.computations.items()}
        self._caller: dict[str, Instruction] = {}
        for instrs in self.computations.values():
            for instr in instrs:
                if instr.opcode in _CALLERS:
                    for callee in instr.callees:
                        self._caller.setdefault(callee, instr)
        self._leaf_cache: dict[str, list[tuple[str, float]]] = {}

    def __contains__(self, name: str) -> bool:
        return name in self.instructions

    def op_name(self, instr: Instruction) -> str:
        """instr's op_name; ops XLA inserted without one (loop-carry copies) take their caller's."""
        seen = 0
        while not instr.op_name and seen < 64:
            caller = self._caller.get(instr.computation)
            if caller is None:
                break
            instr, seen = caller, seen + 1
        return instr.op_name

    # --------------------------------------------------------------------------------- costs
    def _operand_shape(self, instr: Instruction, k: int) -> str:
        if k >= len(instr.operands):
            return ""
        other = self._by_comp.get(instr.computation, {}).get(instr.operands[k])
        return other.shape if other is not None else ""

    def _leaf_cost(self, instr: Instruction) -> float:
        op = instr.opcode
        if op in _FREE:
            return 0.0
        out = _elements(instr.shape)
        if op == "dot":
            lhs = _dims(self._operand_shape(instr, 0))
            m = _CONTRACT_RE.search(instr.attrs)
            k = 1
            if m and lhs:
                for d in m.group(1).split(","):
                    if d and int(d) < len(lhs):
                        k *= lhs[int(d)]
            return 2.0 * out * k
        if op == "convolution":
            rhs = _dims(self._operand_shape(instr, 1))
            return 2.0 * out * (math.prod(rhs) / max(rhs[-1], 1) if rhs else 1)
        if op in ("reduce", "reduce-window", "scatter", "select-and-scatter"):
            return ELEMENT_COST * max(_elements(self._operand_shape(instr, 0)), out)
        if op == "sort":
            n = max(_elements(self._operand_shape(instr, 0)), 1)
            return ELEMENT_COST * n * max(math.log2(n), 1.0)
        if op == "dynamic-update-slice":
            return ELEMENT_COST * _elements(self._operand_shape(instr, 1))
        if op == "broadcast":
            return 0.5 * ELEMENT_COST * out
        if op in _TRANSCENDENTAL:
            return TRANSCENDENTAL_COST * out
        return ELEMENT_COST * out

    def leaves(self, name: str) -> list[tuple[str, float]]:
        """(op_name, cost) of the leaf instructions one executed instruction stands for."""
        if name in self._leaf_cache:
            return self._leaf_cache[name]
        instr = self.instructions.get(name)
        out: list[tuple[str, float]] = []
        if instr is not None:
            self._collect(instr, 1.0, out, depth=0)
        self._leaf_cache[name] = out
        return out

    def _collect(self, instr: Instruction, scale: float, out: list, depth: int) -> None:
        if instr.opcode not in _CALLERS or not instr.callees or depth > 64:
            out.append((self.op_name(instr), scale * self._leaf_cost(instr)))
            return
        if instr.opcode == "while":
            scale *= instr.trip_count
        elif instr.opcode == "conditional":
            scale /= len(instr.callees)
        for callee in instr.callees:
            for inner in self.computations.get(callee, ()):
                self._collect(inner, scale, out, depth + 1)


# ------------------------------------------------------------------------------------- phases
def scope_phases(op_name: str, phases: frozenset[str]) -> list[tuple[str, str | None, str]]:
    """For each `;`-separated alternative of op_name: (innermost phase, its parent phase, scope).

    The scope path is the `/`-separated prefix of op_name (its last part names the primitive).
    """
    result = []
    for alt in op_name.split(";") if op_name else [""]:
        parts = alt.split("/")[:-1]
        hits = [p for p in parts if p in phases]
        phase = hits[-1] if hits else UNSCOPED
        parent = hits[-2] if len(hits) > 1 else None
        result.append((phase, parent, "/".join(parts)))
    return result


@dataclasses.dataclass
class Mix:
    """Where one executed instruction's time goes: phase -> fraction (sums to 1)."""

    phases: dict[str, float]
    unscoped_paths: dict[str, float]  # scope path -> fraction, for the unscoped part
    estimated: bool  # True when the split between several phases rests on the cost model


class PhaseMap:
    """Maps (module, instruction) from a trace to phase mixes, given the modules' HLO text."""

    def __init__(self, texts: Iterable[str], phases: Iterable[str]):
        self.phases = frozenset(phases)
        self.modules: dict[str, list[HloModule]] = {}
        for text in texts:
            mod = HloModule(text)
            self.modules.setdefault(mod.name, []).insert(0, mod)
        self._cache: dict[tuple[str, str], tuple[Mix, Instruction | None]] = {}
        self.parents: Counter = Counter()  # (phase, parent) -> weight seen

    def lookup(self, module: str, op: str) -> tuple[Mix, Instruction | None]:
        key = (module, op)
        if key not in self._cache:
            self._cache[key] = self._mix(module, op)
        return self._cache[key]

    def _mix(self, module: str, op: str) -> tuple[Mix, Instruction | None]:
        # A trace that names no module (some device planes) is matched by instruction name.
        if module:
            candidates = self.modules.get(module, [])
        else:
            candidates = [m for mods in self.modules.values() for m in mods]
        mod = next((m for m in candidates if op in m), None)
        if mod is None:
            return Mix({UNSCOPED: 1.0}, {f"(no HLO for {module or '?'})": 1.0}, False), None
        instr = mod.instructions[op]
        own = mod.op_name(instr)
        leaves = [(own, 1.0)] if instr.is_container else mod.leaves(op)
        if sum(c for _, c in leaves) <= 0:
            leaves = [(own, 1.0)]
        phases: Counter = Counter()
        paths: Counter = Counter()
        for op_name, cost in leaves:
            alts = scope_phases(op_name, self.phases)
            for phase, parent, path in alts:
                share = cost / len(alts)
                phases[phase] += share
                if phase == UNSCOPED:
                    paths[path or "(top level)"] += share
                if parent is not None:
                    self.parents[(phase, parent)] += share
        total = sum(phases.values())
        if total <= 0:
            return Mix({UNSCOPED: 1.0}, {"(top level)": 1.0}, False), instr
        mix = {p: c / total for p, c in phases.items() if c > 0}
        unscoped = {p: c / total for p, c in paths.items() if c > 0}
        return Mix(mix, unscoped, len(mix) > 1), instr

    def parent_of(self) -> dict[str, str]:
        """phase -> the phase that most often encloses it (phases never seen nested: absent)."""
        best: dict[str, tuple[float, str]] = {}
        for (phase, parent), w in self.parents.items():
            if phase != parent and w > best.get(phase, (0.0, ""))[0]:
                best[phase] = (w, parent)
        return {p: parent for p, (_, parent) in best.items()}
