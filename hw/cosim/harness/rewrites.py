"""Rewrites of the generated Verilog for the compiled harness only (not the design, nor what synthesis reads).

Each rewrite gives the same register values every cycle (the same design), in a form Verilator evaluates with
less work per cycle; the suite's harness-vs-cocotb test (cocotb Verilates the design's own Verilog) and the random
differential programs check them, bytes and cycles. :func:`harness_verilog` applies them all.
"""
from __future__ import annotations

import re
from collections.abc import Callable

_ID = r"(?:\\\S+ |[A-Za-z_][\w$]*)"  # a Verilog identifier as yosys writes it (escaped ones end with a space)
_FLOP = re.compile(r"^  always @\(posedge clk\)\n    (%s) ?<= (%s) ?;\n" % (_ID, _ID), re.M)
_NEXT = re.compile(r"^  always @\* begin\n    if \(\\\$auto\$verilog_backend[^\n]*\) begin end\n    (%s) ?= (%s) ?;\n"
                   r"((?:    if \([^\n]*\) begin\n      [^\n]*;\n    end\n)*)  end\n" % (_ID, _ID), re.M)
_DECL = re.compile(r"^  (?:reg|wire)( signed)? (?:\[(\d+):(\d+)\] )?(%s) ?(?:=[^;\n]*)?;$" % _ID, re.M)
_WIDTH = re.compile(r"^  (?:input|output|reg|wire)(?: signed)? (?:\[(\d+):(\d+)\] )?(%s) ?(?:=[^;\n]*)?;$" % _ID, re.M)
_COMB = re.compile(r"^  always @\* begin\n    if \(\\\$auto\$verilog_backend[^\n]*\) begin end\n(.*?)^  end\n", re.S | re.M)
_TOKEN = re.compile(r"\\\S+ |[A-Za-z_][\w$]*")
_MODULE = re.compile(r"^module .*?^endmodule\n", re.S | re.M)
_MUL = re.compile(r"^  assign (%s) ?= \$signed\((%s) ?\) \* \$signed\((%s) ?\);\n" % (_ID, _ID, _ID), re.M)


def _spaced(name: str) -> str:
    """``name`` as it is written before an operator (an escaped identifier ends with a space)."""
    return name + " " if name.startswith("\\") else name


def _apply(text: str, edits: list[tuple[tuple[int, int], str]]) -> str:
    out, pos = [], 0
    for (a, b), new in sorted(edits):
        out += [text[pos:a], new]
        pos = b
    out.append(text[pos:])
    return "".join(out)


def per_module(rewrite: Callable[[str], tuple[str, int]], text: str) -> tuple[str, int]:
    """``rewrite`` applied to each module of ``text`` on its own (yosys reuses names like ``$42`` in every
    module, so a name's readers are counted within its module). Returns the text and the total count."""
    edits, total = [], 0
    for m in _MODULE.finditer(text):
        new, n = rewrite(m.group(0))
        if n:
            edits.append((m.span(), new))
            total += n
    return _apply(text, edits), total


def flop_registers(text: str) -> tuple[str, int]:
    """``text`` with each register in yosys's two-process form -- ``always @(posedge clk) R <= N;`` and a
    combinational ``always @* begin N = D; if (C1) N = V1; ... if (Ck) N = Vk; end`` -- written as one clocked
    process ``always @(posedge clk) if (Ck) R <= Vk; ... else if (C1) R <= V1; else R <= D;`` (no ``else`` when
    ``D`` is ``R``: a hold). The same register: the clocked process samples the same pre-edge values the
    combinational one settled to. Only that exact shape is rewritten, and only where ``N`` has no other reader and
    the width of ``R``. Returns the text and the number of registers rewritten.

    Why: Verilator evaluates the two-process form as two copies per register per cycle (``R = N`` at the edge,
    then ``N = R`` and the enables), whether or not the register is enabled; the one-process form is one branch
    shared by all registers with the same enable. The deep pipelines' many enabled registers (ALU lanes, GEMM
    array) made that most of the per-cycle work."""
    flops = {m.group(2).strip(): (m.group(1).strip(), m.span()) for m in _FLOP.finditer(text)}
    decl = {}
    for m in _DECL.finditer(text):
        decl.setdefault(m.group(4).strip(), []).append((m.group(1), m.group(2), m.group(3)))
    count: dict[str, int] = {}
    for t in _TOKEN.findall(text):
        count[t.strip()] = count.get(t.strip(), 0) + 1
    edits = []
    for m in _NEXT.finditer(text):
        nxt, dflt = m.group(1).strip(), m.group(2).strip()
        if nxt not in flops:
            continue
        reg, fspan = flops[nxt]
        conds = re.findall(r"    if \(([^\n]*)\) begin\n      %s\s*= ([^\n]*);\n    end\n" % re.escape(nxt), m.group(3))
        if len(conds) != m.group(3).count("    if ("):
            continue
        # N: declared once, written here, read only by the flop (else its name is shared or it has other readers)
        if count.get(nxt) != 1 + 1 + len(conds) + 1 or len(decl.get(nxt, [])) != 1 or decl.get(nxt) != decl.get(reg):
            continue
        body = "".join(("    if (" if i == 0 else "    else if (") + f"{c}) {_spaced(reg)}<= {v};\n"
                       for i, (c, v) in enumerate(reversed(conds)))
        if dflt != reg:
            body += ("    else " if conds else "    ") + f"{_spaced(reg)}<= {_spaced(dflt)};\n"
        edits += [(m.span(), ""), (fspan, f"  always @(posedge clk) begin\n{body}  end\n")]
    return _apply(text, edits), len(edits) // 2


def flop_processes(text: str) -> tuple[str, int]:
    """Every register ``always @(posedge clk) R <= N;`` whose next value ``N`` is computed by a combinational
    process that assigns only ``N`` (any nest of ``if``/``else``/``case``) and never reads it, with no other reader
    of ``N``, as one clocked process with the same body (``N = v`` -> ``R <= v``; a leading ``N = R`` is the
    clocked process's hold). The same register: the blocking assignments' last write wins, as the nonblocking
    ones' last does, and both sample the pre-edge values. Returns the text and the number rewritten (apply per
    module: :func:`per_module`).

    Why: what :func:`flop_registers` does for the plain enable shape, for the units' state machines and DMA
    counters (nested conditions and cases), which Verilator otherwise evaluates as a combinational process plus
    a copy on every cycle, idle or not."""
    flops = {m.group(2).strip(): (m.group(1).strip(), m.span()) for m in _FLOP.finditer(text)}
    decl: dict[str, list] = {}
    for m in _DECL.finditer(text):
        decl.setdefault(m.group(4).strip(), []).append(m.group(1, 2, 3))
    count: dict[str, int] = {}
    for t in _TOKEN.findall(text):
        count[t.strip()] = count.get(t.strip(), 0) + 1
    edits = []
    for m in _COMB.finditer(text):
        body = m.group(1)
        assigned = {a.strip() for a in re.findall(r"^\s+(%s) *= " % _ID, body, re.M)}
        if len(assigned) != 1 or next(iter(assigned)) not in flops:
            continue
        nxt = assigned.pop()
        reg, fspan = flops[nxt]
        writes = len(re.findall(r"^\s+%s *= " % re.escape(nxt), body, re.M))
        reads_here = [t.strip() for t in _TOKEN.findall(body)].count(nxt) - writes
        # N: written here only, read by the flop only, declared once with R's width
        if reads_here or count.get(nxt) != writes + 2 or len(decl.get(nxt, [])) != 1 or decl.get(nxt) != decl.get(reg):
            continue
        new = re.sub(r"^(\s+)%s *= " % re.escape(nxt), lambda w: w.group(1) + _spaced(reg) + "<= ", body, flags=re.M)
        hold = f"    {_spaced(reg)}<= {_spaced(reg)};\n"
        new = new[len(hold):] if new.startswith(hold) else new
        edits += [(m.span(), ""), (fspan, f"  always @(posedge clk) begin\n{new}  end\n")]
    return _apply(text, edits), len(edits) // 2


def machine_multiplies(text: str) -> tuple[str, int]:
    """Every ``assign Y = $signed(A) * $signed(B);`` with ``Y`` at most 64 bits as an unsigned 64-bit product of
    ``A`` and ``B`` sign-extended to 64 bits (two wires ``Y__xa``, ``Y__xb``). The same low 64 bits, so the same
    ``Y``. Why: Verilator evaluates a signed product narrower than 64 bits (the GEMM array's 33-bit pair
    products) by sign-extending each operand to the product's width, masking, and sign-extending again to 64
    bits inside ``VL_MULS_QQQ``; this is one extension each and a machine multiply. Returns the text and the
    number rewritten (apply per module: :func:`per_module`)."""
    width: dict[str, int] = {}
    for m in _WIDTH.finditer(text):
        width.setdefault(m.group(3).strip(), int(m.group(1)) - int(m.group(2)) + 1 if m.group(1) else 1)
    edits = []
    for m in _MUL.finditer(text):
        y, a, b = (g.strip() for g in m.groups())
        if width.get(y, 65) > 64:  # unknown or wider: left alone
            continue
        xa, xb = (f"\\{y.lstrip(chr(92))}__x{s} " for s in "ab")
        edits.append((m.span(), f"  wire [63:0] {xa};\n  wire [63:0] {xb};\n  assign {xa}= $signed({_spaced(a)});\n"
                                f"  assign {xb}= $signed({_spaced(b)});\n  assign {y} = {xa}* {xb};\n"))
    return _apply(text, edits), len(edits)


def harness_verilog(text: str) -> str:
    """The design's Verilog as the harness Verilates it: :func:`flop_registers`, :func:`flop_processes` and
    :func:`machine_multiplies`, each per module."""
    text = per_module(flop_registers, text)[0]
    text = per_module(flop_processes, text)[0]
    return per_module(machine_multiplies, text)[0]
