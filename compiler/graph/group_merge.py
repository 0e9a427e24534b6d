"""Grouped convs whose groups do not fill accelerator blocks, regrouped so they run on the accelerator.

The accelerator runs a grouped conv when every group's input and output channels are multiples of the
block (``conv_supported_on_accel``). ShuffleNet-style convs (e.g. 112 channels in 4 groups of 28) are not,
and used to stay on the host. ``merge_conv_groups`` joins ``k`` neighbouring groups into one with a
block-diagonal weight (zeros between the joined groups), ``k`` the smallest divisor of the group count
that makes the joined groups whole blocks: the result is exact (the zeros add nothing; bias, zero-point
folding and requant are per output channel and unchanged), at the cost of ``k`` times the MACs of the
original conv on the accelerator (``k <= MAX_MERGE``). ``attrs["orig_weight_shape"]`` keeps the real
weight shape so MAC counts stay real.
"""
from __future__ import annotations

import numpy as np

from compiler.graph.accel_interface import conv_supported_on_accel
from compiler.graph.ir import Graph, Node

MAX_MERGE = 16  # at most 16x the real MACs (one block's worth of padding per group)


def merge_factor(c: int, o: int, groups: int, block_in: int, block_out: int) -> int | None:
    """Smallest ``k`` dividing ``groups`` with ``groups // k`` merged groups that fit the accelerator; None when
    the conv already fits, is depthwise (its own path), or needs more than ``MAX_MERGE``."""
    if groups == 1 or conv_supported_on_accel(c, o, groups, block_in, block_out):
        return None
    if c % groups or o % groups:
        return None
    for k in range(2, min(groups, MAX_MERGE) + 1):
        if groups % k == 0 and conv_supported_on_accel(c, o, groups // k, block_in, block_out):
            return k
    return None


def merge_weight(w: np.ndarray, groups: int, k: int) -> np.ndarray:
    """(O, C/groups, KH, KW) grouped weight -> (O, k*C/groups, KH, KW) weight for ``groups // k`` groups:
    output channel ``o`` of original group ``j`` keeps its filter at input slot ``j % k``, zeros elsewhere."""
    o, cg, kh, kw = w.shape
    og = o // groups
    out = np.zeros((o, k * cg, kh, kw), dtype=w.dtype)
    for j in range(groups):
        s = j % k
        out[j * og:(j + 1) * og, s * cg:(s + 1) * cg] = w[j * og:(j + 1) * og]
    return out


def merge_conv_groups(g: Graph, cfg) -> int:
    """Regroup the int8 ``QConv2D`` nodes that do not fit the accelerator as they are; returns how many."""
    if cfg is None:
        return 0
    done = 0
    for n in g.nodes:
        if n.op != "QConv2D" or n.inputs[1] not in g.constants:
            continue
        w = g.constants[n.inputs[1]]
        groups = int(n.attrs.get("group", 1))
        c = g.tensors[n.inputs[0]].shape[1]
        if w.ndim != 4 or w.shape[1] * groups != c:
            continue
        k = merge_factor(c, w.shape[0], groups, cfg.block_in, cfg.block_out)
        if k is None:
            continue
        n.inputs[1] = g.add_constant(g.fresh_name(f"{n.name}/w_merged{k}"), merge_weight(w, groups, k))
        n.attrs["group"] = groups // k
        n.attrs.setdefault("orig_weight_shape", tuple(w.shape))
        done += 1
    if done:
        g.remove_dead()
    return done
