"""Model-based tuner: an XGBoost cost model on loop-nest features, batches chosen by simulated annealing.

The model ranks settings by ``log2(cycles / ideal cycles)`` (ideal = MACs / MACs per cycle) from
:mod:`compiler.autotune.features` (pairwise ranking within each task by default, regression as an option),
so measurements of other tasks of the same network train it too (:class:`TransferData` carries them from
task to task, one ranking group per task). Each batch: fit on everything measured, run annealing chains
over the space (moves change one knob; invalid points are skipped) scoring points by the model, and
propose the best-predicted points not yet tried, a few slots left to random exploration. Without any
data the first batch is random. ``xgboost`` is an optional extra (``pip install 'vta-stack[tune]'``).
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
    """Feature rows, targets and task groups measured on earlier tasks (shared by the XGB tuners of one network)."""

    def __init__(self) -> None:
        self.X: list[np.ndarray] = []
        self.y: list[float] = []
        self.groups: list[int] = []
        self._n_groups = 0
        self._families: dict[str, TransferData] = {}

    def family(self, name: str | None) -> "TransferData":
        """The data of the tasks whose spaces share the feature family ``name`` (a space's ``transfer_family``:
        features of other knobs mean other things); None: this one (the spaces without a family share it)."""
        if name is None:
            return self
        return self._families.setdefault(name, TransferData())

    def add(self, X: list[np.ndarray], y: list[float]) -> None:
        """Rows of one task (each call is one group for the ranking objective)."""
        self.X += X
        self.y += y
        self.groups += [self._n_groups] * len(X)
        self._n_groups += 1

    @property
    def n_groups(self) -> int:
        return self._n_groups


OBJECTIVES = ("rank", "reg")


class CostModel:
    """Gradient-boosted trees on feature rows; :meth:`predict` returns a cost (lower = faster).

    ``objective="rank"`` (default): pairwise ranking within each task's group (only the order of a task's
    settings is learned, so tasks of different sizes and speeds train one model without their offsets
    mattering); the cost is the negated ranking score. ``"reg"``: squared-error regression of the target
    (log2 slowdown over ideal); the cost is the prediction."""

    def __init__(self, seed: int = 0, rounds: int = 80, objective: str = "rank", params: dict | None = None) -> None:
        if objective not in OBJECTIVES:
            raise ValueError(f"unknown cost-model objective {objective!r}; choose one of {list(OBJECTIVES)}")
        self.seed, self.rounds, self.objective = seed, rounds, objective
        self.params = dict(params or {})  # xgboost parameters over the defaults
        self.booster = None

    def fit(self, X: np.ndarray, y: np.ndarray, weight: np.ndarray | None = None,
            groups: np.ndarray | None = None) -> None:
        """Fit on rows ``X`` with targets ``y`` (lower = faster). ``groups``: the task of each row (ranking
        compares rows of one group only; default one group). ``weight``: per row; for ranking the weight of
        a group is that of its first row."""
        xgb = _xgb()
        X, y = np.asarray(X, np.float32), np.asarray(y, np.float32)
        params = {"max_depth": 6, "eta": 0.15, "subsample": 0.9, "colsample_bytree": 0.9, "min_child_weight": 1,
                  "nthread": 1, "seed": self.seed, "verbosity": 0}
        if self.objective == "reg":
            d = xgb.DMatrix(X, label=y, weight=weight, nthread=1)
            params["objective"] = "reg:squarederror"
        else:
            g = np.zeros(len(y), np.int64) if groups is None else np.asarray(groups, np.int64)
            order = np.argsort(g, kind="stable")  # xgboost wants each group's rows contiguous
            g_sorted = g[order]
            d = xgb.DMatrix(X[order], label=-y[order], qid=g_sorted, nthread=1)  # higher label = faster
            if weight is not None:
                first = np.r_[True, g_sorted[1:] != g_sorted[:-1]]
                d.set_weight(np.asarray(weight, np.float32)[order][first])
            params.update(objective="rank:pairwise", lambdarank_pair_method="mean",
                          lambdarank_num_pair_per_sample=8)
        self.booster = xgb.train({**params, **self.params}, d, num_boost_round=self.rounds)

    def predict(self, X: np.ndarray) -> np.ndarray:
        p = self.booster.inplace_predict(np.asarray(X, np.float32))
        return p if self.objective == "reg" else -p


def target(task: Task, cycles: int) -> float:
    """The model's target for a measurement: log2(cycles / ideal cycles) (an llvm task: ns over ``task.ideal()``)."""
    ideal = task.ideal() if hasattr(task, "ideal") else task.macs() / task.cfg.macs_per_cycle
    return math.log2(cycles / ideal)


class XGBTuner(Tuner):
    """Model-based tuner (see the module docstring); ``transfer`` shares data across a network's tasks.

    ``chains`` x ``steps``: the annealing over the model per batch; chains start from the best settings
    measured so far and from the best-predicted of a random valid sample. ``explore``: the chance that a
    slot of a batch goes to a random untried valid setting instead (epsilon-greedy: keeps a wrong model
    from circling one region). ``objective``: the cost model's (:class:`CostModel`). ``max_same_threads``: the
    largest share of a batch on one value of the space's ``structure_axis`` (None: the space's
    ``structure_share``, else 0.5)."""

    name = "xgb"

    def __init__(self, task: Task, space: ConvSpace | None = None, seed: int = 0,
                 transfer: TransferData | None = None, chains: int = 24, steps: int = 40,
                 own_weight: float = 4.0, explore: float = 0.05, objective: str = "reg",
                 explore_when_wrong: float = 0.25, max_same_threads: float | None = None) -> None:
        super().__init__(task, space, seed)
        _xgb()  # fail at construction when xgboost is missing
        if transfer is not None:
            transfer = transfer.family(getattr(self.space, "transfer_family", None))
        if not 0.0 <= explore <= 1.0:
            raise ValueError(f"explore must be in [0, 1], got {explore}")
        self.transfer = transfer
        self.chains, self.steps, self.own_weight, self.explore = chains, steps, own_weight, explore
        if max_same_threads is None:
            max_same_threads = getattr(self.space, "structure_share", 0.5)
        if not 0.0 < max_same_threads <= 1.0:
            raise ValueError(f"max_same_threads must be in (0, 1], got {max_same_threads}")
        self.explore_when_wrong, self.max_same_threads = explore_when_wrong, max_same_threads
        self.model = CostModel(seed, objective=objective)
        self._X: list[np.ndarray] = []
        self._y: list[float] = []
        self._fitted_on: tuple[int, int] | None = None
        self._predicted: dict[Point, float] = {}  # the model's score of each proposed point, when proposed
        self._boost = 0.0  # extra exploration while the model ranks this task's batches badly

    def update(self, batch, results) -> None:
        super().update(batch, results)
        pred, meas = [], []
        for k, r in zip(batch, results):
            if r.cycles is not None:
                self._X.append(self.space.features(k))
                self._y.append(target(self.task, r.cycles))
                p = self._predicted.get(self.space.point(k))
                if p is not None:
                    pred.append(p)
                    meas.append(self._y[-1])
        # a model that ranked this batch badly explores more next time (it is wrong about this task's region)
        if len(pred) >= 4:
            rho = _spearman(np.asarray(pred), np.asarray(meas))
            self._boost = self.explore_when_wrong if rho < 0.3 else 0.0

    def finish(self) -> None:
        """Hand this task's measurements to the next tasks (call once tuning of this task ends)."""
        if self.transfer is not None and self._X:
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

    def _fit(self) -> bool:
        """(Re)fit the model on the transferred and own measurements; False when there are too few."""
        t = self.transfer
        tX, ty, tg = (t.X, t.y, t.groups) if t is not None else ([], [], [])
        own_group = t.n_groups if t is not None else 0
        if len(self._X) + len(tX) < 2:
            return False
        if self._fitted_on != (len(tX), len(self._X)):  # refit only when new measurements arrived
            X = np.stack(tX + self._X)
            w = np.concatenate([np.ones(len(tX)), np.full(len(self._X), self.own_weight)])
            g = np.asarray(list(tg) + [own_group] * len(self._X))
            self.model.fit(X, np.asarray(ty + self._y), w, g)
            self._fitted_on = (len(tX), len(self._X))
        return True

    def propose(self, n: int) -> list[Point]:
        if not self._fit():
            return self._spread(n)
        n_explore = int(self.rng.binomial(n, min(1.0, self.explore + self._boost))) if n > 1 else 0
        out = self._rank_all(n - n_explore) if hasattr(self.space, "candidates") else self._anneal(n - n_explore)
        for _ in range(8 * n):  # exploration slots, and a top-up when the chains found too few untried points
            if len(out) >= n:
                return out
            p = self._valid_random(40)
            if p is not None and p not in self.visited and p not in out:
                out.append(p)
        # nearly all valid points tried: raw samples (the loop rejects invalid ones and stops when exhausted)
        return out + [self.space.sample(self.rng) for _ in range(4 * (n - len(out)))]

    def _starts(self) -> list[Point]:
        """Chain starts: the best measured settings, then the best-predicted of a random valid sample."""
        ok = sorted((h for h in self.history if h[1].cycles is not None), key=lambda h: h[1].cycles)
        starts = [p for p in (self.space.point(k) for k, _ in ok[: self.chains // 4]) if p is not None]
        pool = list(dict.fromkeys(p for p in (self._valid_random() for _ in range(4 * self.chains)) if p is not None))
        if pool:
            scores = self._score(pool)
            starts += [pool[i] for i in np.argsort(scores, kind="stable")[: self.chains - len(starts)]]
        return starts

    def _anneal(self, n: int) -> list[Point]:
        """Simulated annealing over the model's predictions; the ``n`` best untried points seen."""
        if n <= 0:
            return []
        sp = self.space
        cur = self._starts()
        if not cur:
            return []
        cur_s = self._score(cur)
        seen: dict[Point, float] = dict(zip(cur, cur_s))
        spread = float(np.std(cur_s)) or 1.0  # temperatures in units of the model's score spread
        temps = np.linspace(0.3, 0.0, self.steps) * spread
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
        return self._pick(sorted((s, p) for p, s in seen.items() if p not in self.visited), n)

    def _rank_all(self, n: int) -> list[Point]:
        """A space that lists its valid points (``candidates()``): the model scores every untried one, no annealing."""
        if n <= 0:
            return []
        todo = [p for p in self.space.candidates() if p not in self.visited]
        if not todo:
            return []
        return self._pick(sorted(zip(self._score(todo).tolist(), todo)), n)

    def _pick(self, ranked: list[tuple[float, Point]], n: int) -> list[Point]:
        """The first ``n`` of ``ranked`` (score, point) pairs, best first, with the batch's diversity cap."""
        sp = self.space
        # diversity: at most a share of the batch on one thread combination (virtual threads, axis, order,
        # epilogue: the knob that changes the program's structure most), so one wrong belief cannot fill a batch
        cap = max(1, math.ceil(self.max_same_threads * n))
        out: list[Point] = []
        per: dict[int, int] = {}
        ax = getattr(sp, "structure_axis", 3)
        for s, p in ranked:
            if per.get(p[ax], 0) < cap:
                out.append(p)
                per[p[ax]] = per.get(p[ax], 0) + 1
                self._predicted[p] = float(s)
                if len(out) == n:
                    break
        return out

    def _spread(self, n: int) -> list[Point]:
        """A first batch without any data: valid settings spread over the feature space (greedy farthest point
        from a random valid pool, standardized features), so the first fit sees every region."""
        pool = list(dict.fromkeys(p for p in (self._valid_random(40) for _ in range(8 * n)) if p is not None))
        if len(pool) <= n:
            return pool + [self.space.sample(self.rng) for _ in range(4 * n)]
        F = np.stack([self.space.features(self.space.knobs(p)) for p in pool]).astype(np.float64)
        F = (F - F.mean(0)) / (F.std(0) + 1e-9)
        chosen = [int(self.rng.integers(len(pool)))]
        dist = np.linalg.norm(F - F[chosen[0]], axis=1)
        while len(chosen) < n:
            i = int(np.argmax(dist))
            chosen.append(i)
            dist = np.minimum(dist, np.linalg.norm(F - F[i], axis=1))
        return [pool[i] for i in chosen]


def _spearman(a: np.ndarray, b: np.ndarray) -> float:
    """Rank correlation of two samples, ties sharing their mean rank (0 when either is constant)."""
    ra, rb = _ranks(a), _ranks(b)
    if ra.std() == 0 or rb.std() == 0:
        return 0.0
    return float(np.corrcoef(ra, rb)[0, 1])


def _ranks(x: np.ndarray) -> np.ndarray:
    """Ranks of ``x`` (0-based), tied values getting the mean of their ranks (a tree model predicts many ties)."""
    _, inv = np.unique(x, return_inverse=True)
    r = np.argsort(np.argsort(x, kind="stable"), kind="stable").astype(np.float64)
    return (np.bincount(inv, r) / np.bincount(inv))[inv]
