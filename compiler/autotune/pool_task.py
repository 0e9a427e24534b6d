"""What the llvm and cuda targets' pooling tasks share: the identity's key and the window operations a pool of
geometry ``spec`` does (the cost model's scale and the progress lines' rate)."""
from __future__ import annotations

import json


class PoolWindows:
    """A pooling task's sizes from its ``spec`` (:class:`~compiler.topi.pool.PoolSpec`) and its key from its
    ``ident``."""

    @property
    def key(self) -> str:
        return json.dumps(self.ident, sort_keys=True)

    def macs(self) -> int:
        """Window operations (a compare or an add per tap and output)."""
        s = self.spec
        return s.n * s.c * s.oh * s.ow * s.kh * s.kw

    def ideal(self) -> float:
        """Scale of the cost model's target (ns per 1000 window operations)."""
        return self.macs() / 1000.0

    def rate(self, ns: int) -> float:
        """Billions of window operations a second at ``ns`` nanoseconds."""
        return self.macs() / ns
