"""A model run's device work, recorded and replayed: the cuda target's answer to per-node dispatch.

Run on the cuda target, a model whose every node runs on the device (kernels on the mirrored arena, views copied
device to device) makes the same device operations each run once it is steady: the same launches on the same
device pointers, the same input upload from the module's input buffer, the same output download. The executor
records each run's operations (:class:`RunRecording`); where two runs in a row made the same ones and the second
left the arena's mirror as it found it, later runs are :class:`DeviceReplay`: the operations alone, each launch's
parameter block built once, none of the per-node Python (argument checks, mirror lookups, state updates).
"""
from __future__ import annotations

from collections.abc import Callable

from compiler.backend.cuda.device import HostTimer, get_device, record_ops, replayable


class RunRecording:
    """One run's device operations on the process's device, with the node boundaries (:meth:`node_done`) and the
    states of ``mirrors`` (the run's arena: what its kernels read and write in place) before and after
    (:meth:`finish`)."""

    def __init__(self, mirrors: list) -> None:
        self.device = get_device()
        self.mirrors = list(mirrors)
        self.before = self.states()
        self.after: tuple | None = None
        self.marks: list[int] = []  # ops recorded when each node was done
        self.host_nodes: list[int] = []  # the nodes (by position) that ran (partly) on the host
        self._rec = record_ops(self.device)
        self.ops = self._rec.start()

    def node_done(self, on_device: bool) -> None:
        """The next node is done; ``on_device``: all it did was device operations (recorded)."""
        if not on_device:
            self.host_nodes.append(len(self.marks))
        self.marks.append(len(self.ops))

    @property
    def host_work(self) -> bool:
        """Some node ran (partly) on the host: its work is not in the operations."""
        return bool(self.host_nodes)

    def finish(self) -> None:
        """Stop recording (the run's last operations, such as the outputs' downloads, are the tail)."""
        self._rec.stop()
        self.after = self.states()

    def states(self) -> tuple:
        return tuple(m.snapshot() for m in self.mirrors)

    def abandon(self) -> None:
        """Stop recording after a failed run."""
        self._rec.stop()

    def same_work(self, other: "RunRecording | None") -> bool:
        return (other is not None and other.device is self.device and other.mirrors == self.mirrors
                and other.marks == self.marks and other.ops == self.ops)


class DeviceReplay:
    """The device operations of a steady run (one :meth:`refusal` finds nothing against), grouped by node, as
    ready calls."""

    def __init__(self, rec: RunRecording) -> None:
        self.device = rec.device
        self.state = rec.after
        self.states = rec.states
        calls = [replayable(rec.device, op) for op in rec.ops]
        bounds = [0, *rec.marks, len(calls)]
        self.groups: list[list[Callable[[], None]]] = [calls[a:b] for a, b in zip(bounds, bounds[1:])]

    @staticmethod
    def refusal(last: RunRecording | None, this: RunRecording) -> str | None:
        """Why ``this`` run cannot be replayed, in words; None where it can: it did only device work, made the same
        operations as the ``last`` run and left its mirrors as it found them (so the next run would make them
        again)."""
        if this.host_work:
            return f"host work in {len(this.host_nodes)} node(s)"
        if this.after != this.before:
            return ("the run left its arena's device mirror otherwise than it found it (a host write into it, a first "
                    "upload)")
        if last is None:
            return "one run recorded: a replay needs two that made the same operations"
        if not this.same_work(last):
            return "its device operations differ from the run before"
        return None

    def run(self, on_device: bool = False) -> list[float] | None:
        """Make the operations again; the seconds each node's took (the last entry: the run's tail, the output
        downloads): the host's time to make them, or with ``on_device`` the device's time to do them (its timer:
        CUDA events between the nodes' operations). None (nothing done) where the device or the mirrors' states are
        not what was recorded."""
        if get_device() is not self.device or self.states() != self.state:
            return None
        timer = self.device.timer(len(self.groups) + 1) if on_device else HostTimer()
        timer.mark()
        for group in self.groups:
            for call in group:
                call()
            timer.mark()
        return timer.seconds()
