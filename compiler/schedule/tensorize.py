"""Tensorize: prove that the loops under a tensorize point compute an intrinsic's declared computation.

The proof works on the stage's *root* axes: the leaf loops from the tensorize point inward must
cover whole root axes (any splits of them included, in any order), exactly one per intrinsic
axis, with the extents the declaration gives; the body must have the declared form
(``sum(a * b)`` for a tensor intrinsic, GEMM included, ``op(dst, src | imm)`` for an ALU op); and
each operand must be indexed by its declared axes in its innermost (element) dimensions. There is
one matcher per declaration kind, driven by the declaration alone (:func:`match_tensor`,
:func:`match_alu`). Every mismatch is reported in terms of the user's loops.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

from compiler.schedule.errors import TensorizeError
from compiler.schedule.relations import Fuse, Split
from compiler.te.expr import AluCall, Binary, Cast, Const, Expr, IterVar, Load, Reduce, walk
from compiler.te.tensor import Tensor

if TYPE_CHECKING:
    from compiler.schedule.stage import Stage
    from isa.intrinsics import TensorIntrinsic

#: TE binary ops that are built-in ALU ops (``sub`` by a constant becomes ADD of its negation).
BINARY_TO_ALU = {"add": "ADD", "sub": "ADD", "mul": "MUL", "shr": "SHR", "shl": "SHR", "min": "MIN", "max": "MAX"}


@dataclass
class TensorMatch:
    """Which root axis plays each intrinsic axis, which tensors are the inp and wgt operands, the intrinsic."""

    axes: dict[str, IterVar]
    inp: Load
    wgt: Load
    intr: "TensorIntrinsic"


#: The former name of :class:`TensorMatch`.
GemmMatch = TensorMatch


@dataclass
class AluMatch:
    """``dst = op(src_load, operand)``: operand is an int (immediate) or a Load (tensor)."""

    op: str
    src: Load
    operand: int | Load
    axes: dict[str, IterVar]


def root_of(stage: "Stage", iv: IterVar) -> IterVar:
    """The root axis a leaf loop was split from (fused loops have no single root)."""
    for rel in stage.relations:
        if isinstance(rel, Split) and iv in (rel.outer, rel.inner):
            return root_of(stage, rel.parent)
        if isinstance(rel, Fuse) and iv is rel.fused:
            raise TensorizeError(f"stage {stage.name}: loop {iv.name!r} is a fusion of {rel.outer.name!r} and "
                                 f"{rel.inner.name!r}; a fused loop cannot be inside a tensorized region")
    return iv


def leaves_of(stage: "Stage", root: IterVar) -> list[IterVar]:
    return [lv for lv in stage.leaf_iter_vars if _safe_root(stage, lv) is root]


def _safe_root(stage: "Stage", iv: IterVar) -> IterVar | None:
    try:
        return root_of(stage, iv)
    except TensorizeError:
        return None


def _strip(e: Expr) -> Expr:
    while isinstance(e, Cast):
        e = e.a
    return e


def _region_roots(stage: "Stage", iv: IterVar, intr_name: str, n_axes: int) -> list[IterVar]:
    k = stage.leaf_iter_vars.index(iv)
    inside = stage.leaf_iter_vars[k:]
    roots: list[IterVar] = []
    for lv in inside:
        r = root_of(stage, lv)
        if r not in roots:
            roots.append(r)
    for r in roots:
        outside = [lv for lv in leaves_of(stage, r) if lv not in inside]
        if outside:
            part = next(lv for lv in inside if root_of(stage, lv) is r)
            raise TensorizeError(
                f"stage {stage.name}: loop {part.name!r} (extent {part.extent}) is only part of axis {r.name!r} "
                f"(extent {r.extent}); loop {outside[0].name!r} is outside the tensorized region, so the region "
                f"does not cover whole intrinsic axes. Move {outside[0].name!r} inside the tensorize point or "
                f"tensorize at an outer loop")
    if len(roots) < n_axes:
        raise TensorizeError(f"stage {stage.name}: tensorizing at loop {iv.name!r} covers only "
                             f"{', '.join(r.name for r in roots)}; intrinsic {intr_name} needs {n_axes} axes: "
                             f"tensorize at a loop further out")
    return roots


def _index_roles(load: Load, stage: "Stage", roots: list[IterVar]) -> dict[IterVar, int]:
    """For each region root axis used by ``load``: the index position where it appears (must be one, plain)."""
    roles: dict[IterVar, int] = {}
    for pos, idx in enumerate(load.indices):
        used = [r for r in roots if _uses(idx, r)]
        for r in used:
            if _strip(idx) is not r:
                raise TensorizeError(
                    f"stage {stage.name}: {load.tensor.name} index {pos} is {idx!r}; loop {_leaf_name(stage, r)!r} "
                    f"(axis {r.name}) of the tensorized region must index a dimension by itself")
            if r in roles:
                raise TensorizeError(f"stage {stage.name}: axis {r.name} indexes {load.tensor.name} twice")
            roles[r] = pos
    return roles


def _uses(e: Expr, v: IterVar) -> bool:
    return any(n is v for n in walk(e))


def _leaf_name(stage: "Stage", root: IterVar) -> str:
    lv = leaves_of(stage, root)
    return lv[0].name if lv else root.name


def _check_element_dims(stage: "Stage", what: str, tensor: Tensor, roles: dict[IterVar, int],
                        want: list[tuple[str, IterVar]]) -> None:
    """``want`` axes must index the last len(want) dims of ``tensor`` in order."""
    nd = tensor.ndim
    for k, (axis_name, r) in enumerate(want):
        pos = nd - len(want) + k
        got = roles.get(r)
        if got != pos:
            where = f"dimension {got}" if got is not None else "no dimension"
            raise TensorizeError(
                f"stage {stage.name}: loop {_leaf_name(stage, r)!r} plays intrinsic axis {axis_name} and must index "
                f"dimension {pos} (element dimension {k}) of the {what} operand {tensor.name}, but it indexes {where}")


def _check_extents(stage: "Stage", intr: "TensorIntrinsic", axes: dict[str, IterVar],
                   why: dict[str, str] | None = None) -> None:
    """Each playing loop has its intrinsic axis' extent; ``why[name]`` says why the loop plays that axis."""
    for name, r in axes.items():
        want = intr.extents[name]
        if r.extent != want:
            because = f" ({why[name]})" if why and name in why else ""
            raise TensorizeError(
                f"stage {stage.name}: loop {_leaf_name(stage, r)!r} (axis {r.name}, extent {r.extent}) plays intrinsic "
                f"{intr.name} axis {name}, whose extent is {want}{because}")


def _sum_of_products(stage: "Stage", body, form: str) -> tuple[Load, Load]:
    """The two tensor reads of a ``sum(x[...] * y[...])`` body (TensorizeError naming what differs)."""
    if not isinstance(body, Reduce) or body.op != "sum":
        raise TensorizeError(f"stage {stage.name}: body {body!r} is not a sum; {form}")
    prod = _strip(body.body)
    if not (isinstance(prod, Binary) and prod.op == "mul"):
        raise TensorizeError(f"stage {stage.name}: summand {body.body!r} is not a product of two tensors; {form}")
    a, b = _strip(prod.a), _strip(prod.b)
    if not (isinstance(a, Load) and isinstance(b, Load)):
        raise TensorizeError(f"stage {stage.name}: summand {body.body!r} must multiply two tensor reads; {form}")
    return a, b


def _operand_label(op) -> str:
    return op.scope if op.name == op.scope else f"{op.name} ({op.scope})"


def match_tensor(stage: "Stage", iv: IterVar, intr: "TensorIntrinsic") -> TensorMatch:
    """Any declared tensor intrinsic, GEMM included (``isa.intrinsics``: one product of an inp and a wgt operand).

    The stage body must be ``sum(a * b)`` (reductions outside the region are the instruction's loops). Each
    root axis inside the region plays one intrinsic axis: an output axis is the one indexing the output's
    element dimension where the declaration has it; a reduction axis is the reduction indexing the operands
    that use it (in their declared element dimensions, or, failing a unique such loop, anywhere: the element
    check then names the wrong dimension). Then every axis is checked: extents, each operand indexed by its
    declared axes in its last dimensions (a vector operand's other element dimension, its piece in the row,
    may be any affine index of the loops outside the region), the output's element dimensions, and scopes.
    Every mismatch names the user's loop and what the declaration wants."""
    from isa import texpr

    if stage.op is None:
        raise TensorizeError(f"stage {stage.name} is a placeholder and computes nothing")
    form = f"intrinsic {intr.name} computes {intr.expr}"
    terms, _red = texpr.products(intr.tree)
    if len(terms) != 1 or len(terms[0]) != 2 or len(intr.inputs) != 2:
        raise TensorizeError(f"intrinsic {intr.name}: the tensorizer matches one product of two operands; {form}")
    a, b = _sum_of_products(stage, stage.op.body, form)
    if _scope(stage, b.tensor) == "inp" or _scope(stage, a.tensor) == "wgt":
        a, b = b, a
    loads = {"inp": a, "wgt": b}
    roots = _region_roots(stage, iv, intr.name, len(intr.extents))
    rroles = {sc: _index_roles(ld, stage, roots) for sc, ld in loads.items()}
    out_pos = {r: k for k, r in enumerate(stage.op.axes) if r in roots}
    n_out, out_axes = len(stage.op.axes), intr.output.axes

    def elem_pos(op, name: str) -> int:
        return loads[op.scope].tensor.ndim - len(op.axes) + op.axes.index(name)

    role: dict[str, IterVar] = {}
    for k, name in enumerate(out_axes):  # output axes: by the output's element dimension
        r = stage.op.axes[n_out - len(out_axes) + k]
        if r in roots:
            role[name] = r
    for name in intr.reduce_axes:  # reductions: by the operands they index
        users = [o for o in intr.inputs if name in o.axes]
        free = [r for r in roots if r.kind == "reduce" and r not in role.values()]
        strict = [r for r in free if all(rroles[o.scope].get(r) == elem_pos(o, name) for o in users)]
        loose = [r for r in free if all(r in rroles[o.scope] for o in users)]
        pick = strict[:1] or (loose if len(loose) == 1 else [])
        if pick:
            role[name] = pick[0]
    for r in roots:
        if r not in role.values():
            if r.kind == "reduce":
                why = ("it is a reduction the intrinsic does not perform" if not intr.reduce_axes or
                       all(n in role for n in intr.reduce_axes) else
                       f"it is a reduction, but not the one indexing {', '.join(_operand_label(o) for o in intr.inputs)} "
                       f"where the intrinsic reduces ({', '.join(intr.reduce_axes)})")
            else:
                why = (f"it is an output axis that is not one of the intrinsic's (those index the last "
                       f"{len(out_axes)} dimensions of {stage.tensor.name})")
            raise TensorizeError(
                f"stage {stage.name}: loop {_leaf_name(stage, r)!r} (axis {r.name}, extent {r.extent}) is inside the "
                f"tensorized region but matches no axis of intrinsic {intr.name} ({intr.expr}): {why}. "
                f"Reorder it outside the tensorize point or tensorize at a loop further in")
    for name in intr.extents:
        if name not in role:
            if name in out_axes:
                where = (f"it indexes dimension {n_out - len(out_axes) + out_axes.index(name)} of the output "
                         f"{stage.tensor.name}")
            else:
                where = "a reduction indexing " + " and ".join(
                    f"{_operand_label(o)} element dimension {o.axes.index(name)}" for o in intr.inputs if name in o.axes)
            raise TensorizeError(f"stage {stage.name}: no loop in the tensorized region plays intrinsic axis "
                                 f"{name} of {intr.name} ({where}); {form}")
    _check_extents(stage, intr, role, {
        n: f"it indexes dimension {n_out - len(out_axes) + k} of {stage.tensor.name}, the intrinsic's output axis {n}: "
           f"its output axes ({', '.join(out_axes)}) index the last {len(out_axes)} dimensions in that order"
        for k, n in enumerate(out_axes)})
    for o in intr.inputs:
        ld = loads[o.scope]
        _check_element_dims(stage, _operand_label(o), ld.tensor, rroles[o.scope], [(n, role[n]) for n in o.axes])
        mine = {role[n] for n in o.axes}
        for r, pos in rroles[o.scope].items():
            if r not in mine:
                plays = next(n for n, v in role.items() if v is r)
                raise TensorizeError(
                    f"stage {stage.name}: loop {_leaf_name(stage, r)!r} plays intrinsic axis {plays} but also indexes "
                    f"dimension {pos} of {ld.tensor.name}; operand {o.name} of {intr.name} is indexed by "
                    f"({', '.join(o.axes)}) only; {form}")
    _check_element_dims(stage, "acc", stage.tensor, out_pos, [(n, role[n]) for n in out_axes])
    for o in intr.inputs:
        ld = loads[o.scope]
        got = _scope(stage, ld.tensor)
        if got not in (o.scope, None):
            raise TensorizeError(f"stage {stage.name}: {ld.tensor.name} is in scope {got!r} but intrinsic "
                                 f"{intr.name} reads its {o.name} operand from {o.scope!r}; cache_read it into "
                                 f"{o.scope!r}")
    return TensorMatch(role, loads["inp"], loads["wgt"], intr)


def _scope(stage: "Stage", t: Tensor) -> str | None:
    try:
        return stage.schedule[t].scope if t.op is not None else "global"
    except Exception:
        return None


def alu_form(body: Expr) -> tuple[str, Expr, Expr]:
    """``(ALU op name, dst operand, src operand)`` of an elementwise body, or raise."""
    body = _strip(body)
    if isinstance(body, AluCall):
        return body.op, body.a, body.b
    if isinstance(body, Binary) and body.op in BINARY_TO_ALU:
        return BINARY_TO_ALU[body.op], body.a, body.b
    raise TensorizeError(f"body {body!r} is not one ALU operation; the ALU computes dst = op(dst, src | imm) "
                         f"with op one of the registered ops (add, mul, shr, min, max or te.alu(name, a, b))")


def match_alu(stage: "Stage", iv: IterVar, intr: "TensorIntrinsic | None") -> AluMatch:
    op, a, b = alu_form(stage.op.body)
    body = _strip(stage.op.body)
    if intr is not None and intr.alu_op is not None and intr.alu_op.name != op:
        raise TensorizeError(f"stage {stage.name}: body computes {op} but intrinsic {intr.name} is {intr.alu_op.name}")
    a, b = _strip(a), _strip(b)
    if not isinstance(a, Load) and isinstance(b, Load) and isinstance(body, Binary) and body.op in ("add", "mul", "min", "max"):
        a, b = b, a  # commutative: put the tensor first
    if not isinstance(a, Load):
        raise TensorizeError(f"stage {stage.name}: the first operand of {op} must be a tensor read, got {a!r}")
    axes = list(stage.op.axes)
    if len(a.indices) != len(axes) or any(_strip(x) is not ax for x, ax in zip(a.indices, axes)):
        raise TensorizeError(f"stage {stage.name}: {a!r} must read {a.tensor.name} at exactly the stage's axes "
                             f"({', '.join(x.name for x in axes)}) so the ALU can update it in place")
    if isinstance(b, Const):
        val = b.value
        if isinstance(body, Binary) and body.op == "sub":
            val = -val
        if isinstance(body, Binary) and body.op == "shl":
            val = -val
        operand: int | Load = val
    elif isinstance(b, Load):
        if isinstance(body, Binary) and body.op in ("sub", "shl"):
            raise TensorizeError(f"stage {stage.name}: {body.op} by a tensor has no ALU op; negate the tensor and add")
        operand = b
    else:
        raise TensorizeError(f"stage {stage.name}: the second operand of {op} must be a constant or a tensor read, "
                             f"got {b!r}")
    k = stage.leaf_iter_vars.index(iv)
    inside = stage.leaf_iter_vars[k:]
    tail = axes[-2:]
    amap = dict(zip(("b", "o"), tail))
    if intr is not None:
        _check_extents(stage, intr, amap)
    for ax in tail:
        if ax not in inside:
            raise TensorizeError(f"stage {stage.name}: element loop {ax.name!r} must be inside the ALU region")
    return AluMatch(op, a, operand, amap)


def match_intrinsic(stage: "Stage", iv: IterVar, intr: "TensorIntrinsic") -> TensorMatch | AluMatch:
    """Check that ``stage``'s loops from ``iv`` inward compute ``intr``; raise :class:`TensorizeError` if not.

    One matcher per declaration kind: :func:`match_tensor` for every tensor intrinsic (GEMM included),
    :func:`match_alu` for every ALU op."""
    if stage.op is None:
        raise TensorizeError(f"stage {stage.name} is a placeholder and computes nothing")
    matcher = {"tensor": match_tensor, "alu": match_alu}.get(intr.kind)
    if matcher is None:
        raise TensorizeError(f"intrinsic {intr.name}: unknown declaration kind {intr.kind!r} (tensor or alu)")
    return matcher(stage, iv, intr)
