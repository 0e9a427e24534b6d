"""One mechanism to run a pure function over many items: in this process, in a process pool, or as Ray tasks.

The design-space exploration (:mod:`compiler.dse`) and the tuner's measurers (:mod:`compiler.autotune.measure`)
both map a pure function ``fn(item, *shared) -> result`` over a list of items through a :class:`Runner`:

- :class:`LoopRunner`: a plain loop in this process (the reference: the others must give the same results),
- :class:`PoolRunner`: a pool of forked worker processes,
- :class:`RayRunner`: Ray tasks on a cluster (``address="local"`` starts a local one with ``workers`` CPUs; any
  other address is passed to ``ray.init``). ``ray`` is an optional extra (``pip install 'vta-stack[ray]'``),
  imported only when a RayRunner is made. The shared arguments are put in Ray's object store once.

``runner.imap(fn, items, shared)`` yields ``(index, result)`` as results arrive (in any order); ``runner.map``
returns them in item order. A Ray worker that dies mid-task (killed, out of memory) loses nothing: Ray retries the
task on another worker (``max_retries``), and a task whose retries ran out is submitted again, up to
``resubmits`` times, before the error is raised. Callers record each result once, when it arrives, so a retried
task never produces a duplicate.
"""
from __future__ import annotations

import inspect
import os
from abc import ABC, abstractmethod
from typing import Any, Callable, Iterator, Sequence


class Runner(ABC):
    """Base of the runners: ``imap`` yields (index, result) pairs; ``map`` returns results in order."""

    #: how many evaluations run at once
    workers: int = 1

    @abstractmethod
    def imap(self, fn: Callable, items: Sequence, shared: tuple = ()) -> Iterator[tuple[int, Any]]:
        """Yield ``(index, fn(items[index], *shared))`` for every item, in the order results arrive."""

    def map(self, fn: Callable, items: Sequence, shared: tuple = ()) -> list:
        out: list = [None] * len(items)
        for i, r in self.imap(fn, items, shared):
            out[i] = r
        return out

    def close(self) -> None:
        pass

    def __enter__(self):
        return self

    def __exit__(self, *exc) -> None:
        self.close()


class LoopRunner(Runner):
    """Evaluate in this process, one item after the other."""

    workers = 1

    def imap(self, fn, items, shared=()):
        for i, item in enumerate(items):
            yield i, fn(item, *shared)


def _call(args: tuple) -> tuple[int, Any]:
    fn, i, item, shared = args
    return i, fn(item, *shared)


class PoolRunner(Runner):
    """A pool of ``workers`` forked processes (made at the first call, reused until ``close``)."""

    def __init__(self, workers: int | None = None) -> None:
        self.workers = (os.cpu_count() or 1) if workers is None else int(workers)
        if self.workers < 1:
            raise ValueError(f"workers must be >= 1, got {workers}")
        self._pool = None

    def imap(self, fn, items, shared=()):
        if self._pool is None:
            import multiprocessing
            from concurrent.futures import ProcessPoolExecutor

            self._pool = ProcessPoolExecutor(self.workers, mp_context=multiprocessing.get_context("fork"))
        from concurrent.futures import as_completed

        futs = [self._pool.submit(_call, (fn, i, item, shared)) for i, item in enumerate(items)]
        for f in as_completed(futs):
            yield f.result()

    def close(self) -> None:
        if self._pool is not None:
            self._pool.shutdown()
            self._pool = None


def _import_modules(modules: tuple, hold_s: float) -> int:
    import importlib
    import time

    for m in modules:
        importlib.import_module(m)
    time.sleep(hold_s)
    return os.getpid()


def _ray_call(item, fn, *shared):
    """``fn(item, *shared)``: the Ray task :meth:`RayRunner.imap` runs for a callable that is not a plain function."""
    return fn(item, *shared)


def _importing(fn, modules: tuple):
    """``fn`` that first imports ``modules``, under ``fn``'s name (Ray titles a busy worker ``ray::<name>``)."""
    import functools

    @functools.wraps(fn)
    def task(*args):
        import importlib

        for m in modules:
            importlib.import_module(m)
        return fn(*args)
    return task


def import_ray():
    """The ``ray`` module, or a ValueError saying how to install it."""
    try:
        import ray
    except ImportError as exc:
        raise ValueError("Ray is not installed: pip install 'vta-stack[ray]' (the optional ray extra)") from exc
    return ray


class RayRunner(Runner):
    """Ray tasks on the cluster at ``address``: ``"local"`` starts a local cluster in this process with
    ``workers`` CPUs (default ``os.cpu_count()``); ``"auto"`` or ``"ray://host:10001"`` joins an existing one.

    Each task takes ``cpus_per_task`` CPUs (so at most workers/cpus_per_task run at once). Ray retries a task
    whose worker died ``max_retries`` times; after that the task is submitted again (``resubmits`` times).
    ``worker_niceness``: the nice value of a local cluster's workers (Ray's own default is 15)."""

    def __init__(self, address: str = "local", workers: int | None = None, *, cpus_per_task: float = 1.0,
                 max_retries: int = 3, resubmits: int = 2, worker_niceness: int = 0) -> None:
        if not isinstance(address, str) or not address:
            raise ValueError(f"Ray address must be 'local', 'auto' or a cluster address, got {address!r}")
        if workers is not None and int(workers) < 1:
            raise ValueError(f"workers must be >= 1, got {workers}")
        ray = import_ray()
        self._ray = ray
        self._started = False
        if not ray.is_initialized():
            if address == "local":
                # Ray starts workers at nice 15 by default (to keep its own daemons responsive); on a shared
                # machine that starves the evaluations next to anything else running, so a local cluster runs them
                # at the driver's priority, like the loop and the process pool
                ray.init(num_cpus=int(workers or os.cpu_count() or 1), include_dashboard=False,
                         log_to_driver=False, configure_logging=False,
                         _system_config={"worker_niceness": worker_niceness})
            else:
                ray.init(address=address, log_to_driver=False, configure_logging=False)
            self._started = True
        self.address = address
        self.workers = int(workers or ray.cluster_resources().get("CPU", 1))
        self.cpus_per_task, self.max_retries, self.resubmits = cpus_per_task, max_retries, resubmits
        self.lost = 0  # tasks that had to be submitted again after their retries ran out
        self.modules: tuple[str, ...] = ()  # what warm() imported: every task imports it first

    def warm(self, modules: Sequence[str] = (), hold_s: float = 1.0) -> float:
        """Start every worker and import ``modules`` in it before the first real task (one task per worker, each
        held ``hold_s`` so that no worker takes two), as a process pool's workers have what their parent
        imported; returns the seconds it took. Ray may still start a worker later (or keep one that no warming task
        reached), so every task of :meth:`imap` imports ``modules`` too before it runs (a dictionary lookup where
        the worker has them)."""
        import time

        ray = self._ray
        self.modules = tuple(dict.fromkeys(self.modules + tuple(modules)))
        t0 = time.perf_counter()
        remote = ray.remote(num_cpus=self.cpus_per_task)(_import_modules)
        ray.get([remote.remote(tuple(modules), hold_s) for _ in range(int(self.workers / self.cpus_per_task))])
        return time.perf_counter() - t0

    def imap(self, fn, items, shared=()):
        ray = self._ray
        # ray.remote takes plain functions only (a busy worker's title is then ``ray::<name>``); a bound method (the
        # synthesis stage's ResourceModel.evaluate) or another picklable callable travels as an argument of _ray_call
        task, lead = (fn, []) if inspect.isfunction(fn) else (_ray_call, [ray.put(fn)])
        if self.modules:
            task = _importing(task, self.modules)
        remote = ray.remote(num_cpus=self.cpus_per_task, max_retries=self.max_retries)(task)
        args = lead + [ray.put(s) for s in shared]
        pending = {remote.remote(item, *args): (i, 0) for i, item in enumerate(items)}
        while pending:
            done, _ = ray.wait(list(pending), num_returns=1)
            ref = done[0]
            i, tries = pending.pop(ref)
            try:
                result = ray.get(ref)
            except (ray.exceptions.WorkerCrashedError, ray.exceptions.NodeDiedError,
                    ray.exceptions.OutOfMemoryError) as exc:
                if tries >= self.resubmits:
                    raise RuntimeError(f"item {i} failed on {tries + 1} workers: {exc}") from exc
                self.lost += 1
                pending[remote.remote(items[i], *args)] = (i, tries + 1)
                continue
            yield i, result

    def close(self) -> None:
        if self._started and self._ray.is_initialized():
            self._ray.shutdown()
        self._started = False


def make_runner(ray: str | None = None, workers: int | None = None) -> Runner:
    """A :class:`RayRunner` when ``ray`` (an address) is given, else a :class:`PoolRunner` with ``workers``
    processes, or a :class:`LoopRunner` when ``workers`` is 0 or 1."""
    if ray:
        return RayRunner(ray, workers)
    if workers is not None and int(workers) < 0:
        raise ValueError(f"workers must be >= 0, got {workers}")
    if workers is not None and int(workers) <= 1:
        return LoopRunner()
    return PoolRunner(workers)
