"""Model-based tuner: an XGBoost cost model on loop-nest features, batches chosen by simulated annealing.

The model predicts ``log2(cycles / ideal cycles)`` (ideal = MACs / MACs per cycle) from
:mod:`compiler.autotune.features`, so measurements of other tasks of the same network train it too
(:class:`TransferData` carries them from task to task). Each batch: fit on everything measured,
run annealing chains over the space (moves change one knob; invalid points are skipped) scoring
points by the model, and propose the best-predicted points not yet tried. Without any data the
first batch is random. ``xgboost`` is an optional extra (``pip install 'vta-stack[tune]'``).
"""
from __future__ import annotations

import math

import numpy as np

from compiler.autotune.space import ConvSpace, Point
from compiler.autotune.task import Task
from compiler.autotune.tuners import Tuner


def _xgb():
    try:
        import xgboost
    except ImportError as exc:
        raise ValueError("the xgb tuner needs xgboost: pip install 'vta-stack[tune]' (or xgboost-cpu)") from exc
    return xgboost


class TransferData:
    """Feature rows and targets measured on earlier tasks (shared by the XGB tuners of one network)."""

    def __init__(self) -> None:
        self.X: list[np.ndarray] = []
        self.y: list[float] = []

    def add(self, X: list[np.ndarray], y: list[float]) -> None:
        self.X += X
        self.y += y


class CostModel:
    """Gradient-boosted trees on feature rows; :meth:`predict` returns the predicted log2 slowdown over ideal."""

    def __init__(self, seed: int = 0, rounds: int = 80) -> None:
        self.seed, self.rounds = seed, rounds
        self.booster = None

    def fit(self, X: np.ndarray, y: np.ndarray, weight: np.ndarray | None = None) -> None:
        xgb = _xgb()
        d = xgb.DMatrix(np.asarray(X, np.float32), label=np.asarray(y, np.float32), weight=weight, nthread=1)
        params = {"max_depth": 6, "eta": 0.15, "subsample": 0.9, "colsample_bytree": 0.9, "min_child_weight": 1,
                  "objective": "reg:squarederror", "nthread": 1, "seed": self.seed, "verbosity": 0}
        self.booster = xgb.train(params, d, num_boost_round=self.rounds)

    def predict(self, X: np.ndarray) -> np.ndarray:
        return self.booster.inplace_predict(np.asarray(X, np.float32))


def target(task: Task, cycles: int) -> float:
    """The model's target for a measurement: log2(cycles / ideal cycles)."""
    ideal = task.macs() / task.cfg.macs_per_cycle
    return math.log2(cycles / ideal)


class XGBTuner(Tuner):
    """Model-based tuner (see the module docstring); ``transfer`` shares data across a network's tasks."""

    name = "xgb"

    def __init__(self, task: Task, space: ConvSpace | None = None, seed: int = 0,
                 transfer: TransferData | None = None, chains: int = 16, steps: int = 30,
                 own_weight: float = 4.0) -> None:
        super().__init__(task, space, seed)
        _xgb()  # fail at construction when xgboost is missing
        self.transfer = transfer
        self.chains, self.steps, self.own_weight = chains, steps, own_weight
        self.model = CostModel(seed)
        self._X: list[np.ndarray] = []
        self._y: list[float] = []
        self._fitted_on: tuple[int, int] | None = None

    def update(self, batch, results) -> None:
        super().update(batch, results)
        for k, r in zip(batch, results):
            if r.cycles is not None:
                self._X.append(self.space.features(k))
                self._y.append(target(self.task, r.cycles))

    def finish(self) -> None:
        """Hand this task's measurements to the next tasks (call once tuning of this task ends)."""
        if self.transfer is not None:
            self.transfer.add(self._X, self._y)
            self._X, self._y = [], []

    def _valid_random(self, tries: int = 400) -> Point | None:
        for _ in range(tries):
            p = self.space.sample(self.rng)
            if self.space.reject(self.space.knobs(p)) is None:
                return p
        return None

    def _score(self, pts: list[Point]) -> np.ndarray:
        return self.model.predict(np.stack([self.space.features(self.space.knobs(p)) for p in pts]))

    def propose(self, n: int) -> list[Point]:
        tX = self.transfer.X if self.transfer is not None else []
        ty = self.transfer.y if self.transfer is not None else []
        if len(self._X) + len(tX) < 2:
            return [self.space.sample(self.rng) for _ in range(4 * n)]
        if self._fitted_on != (len(tX), len(self._X)):  # refit only when new measurements arrived
            X = np.stack(tX + self._X)
            w = np.concatenate([np.ones(len(tX)), np.full(len(self._X), self.own_weight)])
            self.model.fit(X, np.asarray(ty + self._y), w)
            self._fitted_on = (len(tX), len(self._X))
        out = self._anneal(n)
        if len(out) < n:  # the chains found too few untried points: top up with random ones
            out += [self.space.sample(self.rng) for _ in range(4 * (n - len(out)))]
        return out

    def _anneal(self, n: int) -> list[Point]:
        """Simulated annealing over the model's predictions; the ``n`` best untried points seen."""
        sp = self.space
        starts = [sp.point(k) for k, r in sorted((h for h in self.history if h[1].cycles is not None),
                                                  key=lambda h: h[1].cycles)[: self.chains // 2]]
        while len(starts) < self.chains:
            p = self._valid_random()
            if p is None:
                break
            starts.append(p)
        cur = [p for p in starts if p is not None]
        if not cur:
            return []
        cur_s = self._score(cur)
        seen: dict[Point, float] = dict(zip(cur, cur_s))
        temps = np.linspace(0.3, 0.0, self.steps)
        for t in temps:
            nxt = []
            for p in cur:
                q = sp.neighbour(p, self.rng)
                nxt.append(q if sp.reject(sp.knobs(q)) is None else p)
            nxt_s = self._score(nxt)
            for k, (q, s) in enumerate(zip(nxt, nxt_s)):
                seen[q] = float(s)
                d = s - cur_s[k]
                if d <= 0 or (t > 0 and self.rng.random() < math.exp(-d / t)):
                    cur[k], cur_s[k] = q, s
        ranked = sorted((s, p) for p, s in seen.items() if p not in self.visited)
        return [p for _, p in ranked[:n]]
