import numpy as np
import pytest

from isa import Alu, Finish, Gemm, Load, MemType, Store, make_config
from jit_runtime import CommandQueue, DependencyError

CFG = make_config("pynq-z1")


def _queue():
    q = CommandQueue(CFG)
    return q, q.alloc((64, 16), np.int8, name="x")


def test_pop_folds_into_next_instruction_of_the_unit():
    q, x = _queue()
    q.dep_pop("compute", "load")
    q.load_2d("inp", 0, x, 0, x_size=4, y_size=1, x_stride=4)
    assert q.instructions[-1].deps.pop_next


def test_push_attaches_to_the_last_instruction_of_the_unit():
    q, x = _queue()
    q.load_2d("inp", 0, x, 0, x_size=4, y_size=1, x_stride=4)
    q.load_2d("wgt", 0, x, 0, x_size=1, y_size=1, x_stride=1)
    q.dep_push("load", "compute")
    insns = q.instructions
    assert len(insns) == 2 and insns[1].deps.push_next and not insns[0].deps.push_next


def test_push_emits_a_nop_when_it_must():
    q, x = _queue()
    q.dep_push("store", "compute")  # no store instruction yet
    q.load_2d("inp", 0, x, 0, x_size=4, y_size=1, x_stride=4)
    q.dep_push("load", "compute")
    q.dep_push("load", "compute")  # the last load already pushes: a NOP carries the second
    q.dep_pop("compute", "load")
    q.dep_push("load", "compute")  # a pending pop comes first: NOP with pop and push
    insns = q.instructions
    assert isinstance(insns[0], Store) and insns[0].y_size == 0 and insns[0].deps.push_prev
    assert insns[1].deps.push_next
    assert insns[2].y_size == 0 and insns[2].deps.push_next
    assert insns[3].y_size == 0 and insns[3].deps.pop_next and insns[3].deps.push_next


def test_two_pops_of_one_queue_take_two_instructions():
    q, _ = _queue()
    q.dep_pop("load", "compute")
    q.dep_pop("load", "compute")
    q.dep_pop("store", "compute")
    insns = q.instructions
    assert len(insns) == 1 and isinstance(insns[0], Gemm) and insns[0].deps.pop_prev


def test_pop_without_push_raises_at_synchronize():
    q, x = _queue()
    q.dep_pop("load", "compute")
    q.push_alu(lambda k: k.push(0, 0), op="ADD", use_imm=True)
    with pytest.raises(DependencyError, match=r"load->compute \(pushes 0, pops 1\)"):
        q.synchronize()
    q2, _ = _queue()
    q2.dep_pop("compute", "store")
    with pytest.raises(DependencyError, match="no matching push"):
        q2.finalize()


def test_only_neighbours_exchange_tokens():
    q, _ = _queue()
    with pytest.raises(DependencyError, match="neighbours"):
        q.dep_push("load", "store")
    with pytest.raises(DependencyError, match="neighbours"):
        q.dep_pop("store", "load")
    with pytest.raises(DependencyError, match="unknown unit"):
        q.dep_push("fetch", "load")


def test_finish_waits_for_load_and_store_and_tokens_balance():
    q, x = _queue()
    y = q.alloc((64, 16), np.int8, name="y")
    q.load_2d("inp", 0, x, 0, x_size=4, y_size=1, x_stride=4)
    q.dep_push("load", "compute")
    q.dep_pop("load", "compute")
    q.push_gemm(lambda k: k.push(0, 0, 0))
    q.dep_push("compute", "load")  # left over: the drain makes load pop it
    q.dep_push("compute", "store")
    q.dep_pop("compute", "store")
    q.store_2d(0, y, 0, x_size=1, y_size=1, x_stride=1)
    prog = q.finalize()
    insns = prog.instructions()
    fin = insns[-1]
    assert isinstance(fin, Finish) and fin.deps.pop_prev and fin.deps.pop_next
    assert sum(isinstance(i, Finish) for i in insns) == 1
    tokens = prog.runtime["tokens"]
    assert all(t["push"] == t["pop"] for t in tokens.values()), tokens
    # the store's push to compute rides on the STORE itself; load pops compute's token then pushes
    stores = [i for i in insns if isinstance(i, Store)]
    assert stores[-1].deps.push_prev
    loads = [i for i in insns if isinstance(i, Load) and i.mem == MemType.INP]
    assert loads[-1].deps.pop_next and loads[-1].deps.push_next


def test_finish_alone_for_a_compute_only_program():
    q, _ = _queue()
    q.push_alu(lambda k: k.push(0, 0), op="ADD", use_imm=True)
    insns = q.finalize().instructions()
    assert [type(i) for i in insns] == [Load, Alu, Finish]
    assert insns[-1].deps.names() == []
