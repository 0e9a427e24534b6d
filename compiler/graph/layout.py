"""Data-layout packing: accelerator ops get NCHW{B}n{BI}c tensors with few layout transforms.

``QConv2D``/``QDense`` that fit the accelerator become ``AccelConv2D``/``AccelDense`` on packed
tensors (weights, bias and per-channel requant params are packed/padded at compile time).
Elementwise ops whose operands are all packed alike (or scalars) stay packed too, so chains
such as conv -> add -> conv keep one layout; an int8 ``MaxPool`` on a packed tensor becomes
``PackedMaxPool`` (pools over axes 2, 3 of the packed layout), and a channel ``Concat`` whose
inputs fill whole blocks concatenates the packed block axis. A plain tensor keeps its original name; its
packed twin is ``name@packed{block}``. Pack/Unpack/Repack nodes are inserted lazily, at most one
per (tensor, layout).
"""
from __future__ import annotations

import numpy as np

from compiler.graph.accel_interface import ceil_to, conv_supported_on_accel, pack_weight, pad_channels, pad_requant
from compiler.graph.ir import Graph, Node

LAYOUT_OPS = ("PackActivation", "UnpackActivation", "Repack")
PACKABLE_ELEMWISE = {"Relu", "Clip", "Add", "Mul", "Sub", "Sigmoid", "HardSigmoid", "HardSwish", "LeakyRelu",
                     "QuantizeLinear", "DequantizeLinear", "Identity", "QAdd"}


def _accel_ok(g: Graph, n: Node, cfg) -> bool:
    """Whether a QConv2D/QDense maps onto the accelerator; records ``attrs["host_reason"]`` when not."""
    if n.attrs.get("accel_infeasible"):
        return False  # compiler.graph.width_split recorded why (no tiling fits)
    if n.op == "QDense":
        ok = len(g.tensors[n.inputs[0]].shape) == 2
        why = "dense input is not 2-D"
    elif tuple(n.attrs.get("dilations", (1, 1))) != (1, 1):
        ok, why = False, f"dilations {tuple(n.attrs['dilations'])} (the accelerator conv has dilation 1)"
    else:
        c, o = g.tensors[n.inputs[0]].shape[1], g.tensors[n.inputs[1]].shape[0]
        grp = int(n.attrs.get("group", 1))
        ok = conv_supported_on_accel(c, o, grp, cfg.block_in, cfg.block_out)
        why = (f"grouped conv: {c} inputs / {o} outputs in {grp} groups are not multiples of the "
               f"{cfg.block_in}x{cfg.block_out} block per group (nor depthwise)")
    if not ok:
        n.attrs["host_reason"] = why
    return ok


class _Layouts:
    """Tracks packed twins: plain name -> {block: packed name}, packed name -> (plain, block)."""

    def __init__(self, g: Graph, cfg) -> None:
        self.g, self.cfg = g, cfg
        self.packed: dict[str, dict[int, str]] = {}
        self.plain_of: dict[str, tuple[str, int]] = {}
        self.plain_ready: set[str] = set(g.inputs) | set(g.constants)
        self.new_nodes: list[Node] = []
        self.transforms = 0

    def register(self, plain: str, block: int, packed: str, dtype) -> None:
        n, c, *rest = self.g.tensors[plain].shape
        b = self.cfg.batch
        shape = ((ceil_to(n, b) // b, ceil_to(c, block) // block, *rest, b, block))
        self.g.set_info(packed, shape, dtype)
        self.packed.setdefault(plain, {})[block] = packed
        self.plain_of[packed] = (plain, block)

    def get_packed(self, plain: str, block: int) -> str:
        have = self.packed.get(plain, {})
        if block in have:
            return have[block]
        name = f"{plain}@packed{block}"
        if have:
            src = next(iter(have.values()))
            self._emit("Repack", src, name, {"batch": self.cfg.batch, "block": block})
        else:
            self._emit("PackActivation", self.get_plain(plain), name, {"batch": self.cfg.batch, "block": block})
        self.register(plain, block, name, self.g.tensors[plain].dtype)
        return name

    def get_plain(self, plain: str) -> str:
        if plain in self.plain_ready or plain not in self.packed:
            return plain
        n, c = self.g.tensors[plain].shape[:2]
        self._emit("UnpackActivation", next(iter(self.packed[plain].values())), plain, {"n": n, "c": c})
        self.plain_ready.add(plain)
        return plain

    def _emit(self, op: str, src: str, dst: str, attrs: dict) -> None:
        self.new_nodes.append(Node(op, [src], [dst], attrs, f"{op.lower()}:{dst}"))
        self.transforms += 1


def _scalar_operand(g: Graph, name: str) -> bool:
    return not name or (name in g.constants and np.size(g.constants[name]) == 1)


def _to_accel(g: Graph, n: Node, lay: _Layouts, cfg) -> Node:
    bi, bo = cfg.block_in, cfg.block_out
    if n.inputs[1] in g.constants:
        w = g.constants[n.inputs[1]]
        wp = g.add_constant(g.fresh_name(f"{n.name}/w_packed"), pack_weight(w, bo, bi))
    else:  # a weight computed at run time (compiler.quant.act_matmul): packed by a host node
        w = np.empty(g.tensors[n.inputs[1]].shape, np.int8)  # shape only
        wp = g.fresh_name(f"{n.name}/w_packed")
        g.set_info(wp, pack_weight(w, bo, bi).shape, np.int8)
        lay.new_nodes.append(Node("PackDenseWeight", [lay.get_plain(n.inputs[1])], [wp], {"block_out": bo, "block_in": bi},
                                  f"{n.name}/pack_weight"))
        lay.transforms += 1
    o_pad = ceil_to(w.shape[0], bo)
    bias = g.constants.get(n.inputs[2]) if len(n.inputs) > 2 and n.inputs[2] else None
    bp = g.add_constant(g.fresh_name(f"{n.name}/b_padded"), pad_channels(bias, o_pad, np.int32)) if bias is not None else ""
    if bias is None and len(n.inputs) > 2 and n.inputs[2]:
        bp = lay.get_plain(n.inputs[2])  # a bias computed at run time (zero points): the backends pad it
    rq_p = pad_requant(n.attrs["requant"], o_pad)
    x = lay.get_packed(n.inputs[0], bi)
    out = f"{n.outputs[0]}@packed{bo}"
    lay.register(n.outputs[0], bo, out, np.int8)
    attrs = dict(n.attrs, requant=rq_p, orig_weight_shape=n.attrs.get("orig_weight_shape", tuple(w.shape)))
    return Node("AccelConv2D" if n.op == "QConv2D" else "AccelDense", [x, wp, bp], [out], attrs, n.name)


PACKED_INT_OPS = ("QLookup", "QMul", "QGlobalAveragePool")


def _packed_int_op(g: Graph, n: Node, lay: _Layouts) -> bool:
    """Integer host ops that run on packed 4-D activations already packed alike: ``QLookup`` (elementwise),
    ``QGlobalAveragePool`` (sums axes 2, 3) and ``QMul`` whose operands differ only by H/W broadcasting
    (the squeeze-excite gate ``(N, C, 1, 1)``: packed, it broadcasts the same way)."""
    if n.op not in PACKED_INT_OPS or len(n.outputs) != 1 or not all(i in lay.packed for i in n.inputs):
        return False
    shapes = [g.tensors[i].shape for i in n.inputs]
    if any(len(sh) != 4 for sh in shapes) or len({b for i in n.inputs for b in lay.packed[i]} & set(
            lay.packed[n.inputs[0]])) != 1 or any(set(lay.packed[i]) != set(lay.packed[n.inputs[0]]) for i in n.inputs):
        return False
    if n.op == "QMul":
        a, b = shapes
        return a[:2] == b[:2] and all(x == y or 1 in (x, y) for x, y in zip(a[2:], b[2:]))
    return True


def _packed_channel_concat(g: Graph, n: Node, lay: _Layouts) -> bool:
    """A channel ``Concat`` of 4-D tensors packed alike whose channel counts (all but the last) fill whole blocks:
    the packed result is the concatenation of the packed inputs along the block axis."""
    if n.op != "Concat" or len(n.outputs) != 1 or not n.inputs or not all(i and i in lay.packed for i in n.inputs):
        return False
    shapes = [g.tensors[i].shape for i in n.inputs]
    if any(len(sh) != 4 for sh in shapes) or int(n.attrs.get("axis", 1)) % 4 != 1:
        return False
    common = set.intersection(*(set(lay.packed[i]) for i in n.inputs))
    if len(common) != 1 or set(lay.packed[n.inputs[0]]) != common:
        return False
    blk = next(iter(common))
    return all(sh[1] % blk == 0 for sh in shapes[:-1]) and len({(sh[0], *sh[2:]) for sh in shapes}) == 1


def pack_layouts(g: Graph, cfg) -> int:
    """Rewrite ``g`` in place for a config with ``batch``, ``block_in``, ``block_out``; returns #transforms."""
    lay = _Layouts(g, cfg)
    for n in g.nodes:
        if n.op in ("QConv2D", "QDense") and _accel_ok(g, n, cfg):
            lay.new_nodes.append(_to_accel(g, n, lay, cfg))
            continue
        if (n.op == "MaxPool" and n.inputs[0] in lay.packed and g.tensors[n.inputs[0]].dtype == np.int8
                and len(g.tensors[n.inputs[0]].shape) == 4 and len(n.outputs) == 1
                and tuple(n.attrs.get("dilations", (1, 1))) == (1, 1)):
            blk, src = next(iter(lay.packed[n.inputs[0]].items()))
            out = f"{n.outputs[0]}@packed{blk}"
            lay.register(n.outputs[0], blk, out, np.int8)
            lay.new_nodes.append(Node("PackedMaxPool", [src], [out], dict(n.attrs), n.name))
            continue
        if n.op == "FoldTaps":  # its consumer is an accelerator conv: produce the packed layout directly
            out = f"{n.outputs[0]}@packed{cfg.block_in}"
            lay.register(n.outputs[0], cfg.block_in, out, g.tensors[n.outputs[0]].dtype)
            attrs = dict(n.attrs, batch=cfg.batch, block=cfg.block_in)
            lay.new_nodes.append(Node(n.op, [lay.get_plain(n.inputs[0])], [out], attrs, n.name))
            continue
        if (n.op in ("Flatten", "Reshape") and n.inputs[0] in lay.packed and len(g.tensors[n.inputs[0]].shape) == 4
                and g.tensors[n.inputs[0]].shape[2:] == (1, 1)
                and g.tensors[n.outputs[0]].shape == g.tensors[n.inputs[0]].shape[:2]):
            blk, src = next(iter(lay.packed[n.inputs[0]].items()))  # (N, C, 1, 1) -> (N, C): a packed reshape
            out = f"{n.outputs[0]}@packed{blk}"
            lay.register(n.outputs[0], blk, out, g.tensors[n.outputs[0]].dtype)
            lay.new_nodes.append(Node("PackedSqueezeHW", [src], [out], {}, n.name))
            continue
        if _packed_channel_concat(g, n, lay):  # block-aligned channel concat: concatenate the packed block axis
            blk = next(iter(lay.packed[n.inputs[0]]))
            out = f"{n.outputs[0]}@packed{blk}"
            lay.register(n.outputs[0], blk, out, g.tensors[n.outputs[0]].dtype)
            lay.new_nodes.append(Node("Concat", [lay.packed[i][blk] for i in n.inputs], [out], {"axis": 1}, n.name))
            continue
        if _packed_int_op(g, n, lay):
            blk = next(iter(lay.packed[n.inputs[0]]))
            out = f"{n.outputs[0]}@packed{blk}"
            lay.register(n.outputs[0], blk, out, np.int8)
            attrs = dict(n.attrs, packed=True) if n.op == "QGlobalAveragePool" else dict(n.attrs)
            lay.new_nodes.append(Node(n.op, [lay.packed[i][blk] for i in n.inputs], [out], attrs, n.name))
            continue
        data_ins = [i for i in n.inputs if i and not _scalar_operand(g, i)]
        blocks = {b for i in data_ins for b in lay.packed.get(i, {})}
        same = (n.op in PACKABLE_ELEMWISE and data_ins and len(n.outputs) == 1 and len(blocks) == 1
                and all(i in lay.packed for i in data_ins)
                and len({g.tensors[i].shape for i in data_ins}) == 1
                and all(len(g.tensors[i].shape) in (2, 4) for i in data_ins)
                and (n.op != "QuantizeLinear" and n.op != "DequantizeLinear" or int(n.attrs.get("axis", 1)) == 1))
        if same:
            blk = blocks.pop()
            ins = [lay.packed[i][blk] if i in data_ins else i for i in n.inputs]
            out = f"{n.outputs[0]}@packed{blk}"
            lay.register(n.outputs[0], blk, out, g.tensors[n.outputs[0]].dtype)
            lay.new_nodes.append(Node(n.op, ins, [out], dict(n.attrs), n.name))
            continue
        n.inputs = [lay.get_plain(i) if i else i for i in n.inputs]
        lay.new_nodes.append(n)
        lay.plain_ready.update(n.outputs)
    for o in g.outputs:
        lay.get_plain(o)
    g.nodes = lay.new_nodes
    g.remove_dead()
    return lay.transforms


def count_layout_transforms(g: Graph) -> int:
    return sum(n.op in LAYOUT_OPS for n in g.nodes)
