"""Expression nodes of the tensor expression language.

Expressions are immutable trees: constants, loop variables, tensor reads, binary
arithmetic (``+ - * >> <<``, ``min``/``max``), casts, comparisons, selects and sums
over reduce axes. Python operators build them (``a + b``, ``x >> 8``).
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Union

from compiler.te.errors import TeError

if TYPE_CHECKING:
    from compiler.te.tensor import Tensor

INT_DTYPES = ("int8", "int16", "int32", "int64", "bool", "uint8")  # uint8: the u8 operand of int8 dot products
FLOAT_DTYPES = ("float32",)
DTYPES = INT_DTYPES + FLOAT_DTYPES  # float32 is for the CPU/GPU targets; the accelerator computes integers
BINARY_OPS = ("add", "sub", "mul", "shr", "shl", "min", "max", "and", "or", "lt", "le", "ge", "gt", "eq", "ne",
              "div", "floordiv", "floormod")
_BOOL_OPS = ("and", "or", "lt", "le", "ge", "gt", "eq", "ne")
_SYMBOLS = {"add": "+", "sub": "-", "mul": "*", "shr": ">>", "shl": "<<", "and": "&", "or": "|",
            "lt": "<", "le": "<=", "ge": ">=", "gt": ">", "eq": "==", "ne": "!=", "div": "/", "floordiv": "//",
            "floormod": "%"}
MATH_FUNCS = ("exp", "log", "sqrt", "tanh", "abs", "floor", "round", "erf", "sin", "cos")  # float32 -> float32
# (``round``: half to even)

ExprLike = Union["Expr", int]


def _bits(dtype: str) -> int:
    if dtype in FLOAT_DTYPES:
        return int(dtype[5:])
    return 1 if dtype == "bool" else int(dtype.removeprefix("u")[3:])


def is_float(dtype: str) -> bool:
    return dtype in FLOAT_DTYPES


def is_unsigned(dtype: str) -> bool:
    """An unsigned integer dtype (widened with zeros, not the sign)."""
    return dtype == "uint8"


def promote(a: str, b: str) -> str:
    """The wider of two dtypes (a float dtype wins over any integer one)."""
    if is_float(a) or is_float(b):
        return "float32"
    return a if _bits(a) >= _bits(b) else b


def const(value: int | float, dtype: str = "int32") -> "Const":
    """A constant (``dtype='float32'`` for a float one)."""
    if dtype not in DTYPES:
        raise TeError(f"const: unsupported dtype {dtype!r}; dtypes: {DTYPES}")
    return Const(float(value) if is_float(dtype) else int(value), dtype)


def as_expr(v: ExprLike) -> "Expr":
    if isinstance(v, Expr):
        return v
    if isinstance(v, bool):
        return Const(int(v), "bool")
    if isinstance(v, int) or hasattr(v, "__index__"):
        return Const(int(v), "int32")
    if isinstance(v, float) or (hasattr(v, "dtype") and getattr(v.dtype, "kind", "") == "f"):
        return Const(float(v), "float32")
    raise TeError(f"cannot use {v!r} ({type(v).__name__}) in a tensor expression; use ints, floats, Vars or tensor reads")


def _binop(op: str, reflected: bool = False):
    """An operator method building ``Binary(op, self, o)`` (``Binary(op, o, self)`` if reflected)."""
    if reflected:
        def method(self: "Expr", o: ExprLike) -> "Expr":
            return Binary(op, as_expr(o), self)
    else:
        def method(self: "Expr", o: ExprLike) -> "Expr":
            return Binary(op, self, as_expr(o))
    return method


class Expr:
    """Base class: an integer-valued expression with a dtype."""

    dtype: str

    __add__, __radd__ = _binop("add"), _binop("add", True)
    __sub__, __rsub__ = _binop("sub"), _binop("sub", True)
    __mul__, __rmul__ = _binop("mul"), _binop("mul", True)
    __rshift__, __lshift__ = _binop("shr"), _binop("shl")
    __lt__, __le__, __gt__, __ge__ = _binop("lt"), _binop("le"), _binop("gt"), _binop("ge")
    __and__, __or__ = _binop("and"), _binop("or")
    __truediv__, __rtruediv__ = _binop("div"), _binop("div", True)
    __floordiv__, __rfloordiv__ = _binop("floordiv"), _binop("floordiv", True)
    __mod__, __rmod__ = _binop("floormod"), _binop("floormod", True)

    def equal(self, o: "ExprLike") -> "Expr":
        """``self == o`` as an expression (``==`` itself keeps Python identity semantics)."""
        return Binary("eq", self, as_expr(o))

    def not_equal(self, o: "ExprLike") -> "Expr":
        return Binary("ne", self, as_expr(o))

    def __neg__(self) -> "Expr":
        return Binary("sub", Const(0, self.dtype), self)

    def __bool__(self) -> bool:
        raise TeError("a tensor expression has no truth value; use te.select(cond, a, b) instead of if/and/or")

    def astype(self, dtype: str) -> "Expr":
        return cast(dtype, self)

    __hash__ = object.__hash__


@dataclass(frozen=True, eq=False)
class Const(Expr):
    value: int | float
    dtype: str = "int32"

    def __repr__(self) -> str:
        return str(self.value)


class Var(Expr):
    """A named integer variable (loop index)."""

    def __init__(self, name: str, dtype: str = "int32"):
        self.name = name
        self.dtype = dtype

    def __repr__(self) -> str:
        return self.name


class IterVar(Var):
    """A loop axis with an extent: ``kind`` is ``"data"`` (output axis) or ``"reduce"``."""

    def __init__(self, name: str, extent: int, kind: str = "data"):
        super().__init__(name)
        if not isinstance(extent, int) or extent <= 0:
            raise TeError(f"axis {name!r}: extent must be a positive int, got {extent!r}")
        if kind not in ("data", "reduce"):
            raise TeError(f"axis {name!r}: kind must be 'data' or 'reduce', got {kind!r}")
        self.extent = extent
        self.kind = kind

    def __repr__(self) -> str:
        return self.name


@dataclass(frozen=True, eq=False)
class Binary(Expr):
    op: str
    a: Expr
    b: Expr

    def __post_init__(self) -> None:
        if self.op not in BINARY_OPS:
            raise TeError(f"unknown binary op {self.op!r}; known: {BINARY_OPS}")
        if self.op == "div" and not is_float(promote(self.a.dtype, self.b.dtype)):
            raise TeError(f"'/' is float division; for integers use '//' (floor division) or '>>': {self.a!r} / {self.b!r}")
        if self.op in ("shr", "shl", "and", "or") and (is_float(self.a.dtype) or is_float(self.b.dtype)):
            raise TeError(f"{self.op} needs integer operands, got {self.a.dtype} and {self.b.dtype}")

    @property
    def dtype(self) -> str:  # type: ignore[override]
        if self.op in _BOOL_OPS:
            return "bool"
        if self.op in ("shr", "shl"):
            return self.a.dtype
        return promote(self.a.dtype, self.b.dtype)

    def __repr__(self) -> str:
        if self.op in _SYMBOLS:
            return f"({self.a!r} {_SYMBOLS[self.op]} {self.b!r})"
        return f"{self.op}({self.a!r}, {self.b!r})"


@dataclass(frozen=True, eq=False)
class Cast(Expr):
    dtype: str
    a: Expr

    def __repr__(self) -> str:
        return f"{self.dtype}({self.a!r})"


@dataclass(frozen=True, eq=False)
class Select(Expr):
    cond: Expr
    a: Expr
    b: Expr

    @property
    def dtype(self) -> str:  # type: ignore[override]
        return promote(self.a.dtype, self.b.dtype)

    def __repr__(self) -> str:
        return f"select({self.cond!r}, {self.a!r}, {self.b!r})"


@dataclass(frozen=True, eq=False)
class Call(Expr):
    """A float math function (``MATH_FUNCS``) of one float32 argument."""

    name: str
    a: Expr
    dtype: str = "float32"

    def __post_init__(self) -> None:
        if self.name not in MATH_FUNCS:
            raise TeError(f"unknown math function {self.name!r}; known: {MATH_FUNCS}")

    def __repr__(self) -> str:
        return f"{self.name}({self.a!r})"


@dataclass(frozen=True, eq=False)
class Load(Expr):
    """``tensor[indices]``."""

    tensor: "Tensor"
    indices: tuple[Expr, ...]

    @property
    def dtype(self) -> str:  # type: ignore[override]
        return self.tensor.dtype

    def __repr__(self) -> str:
        return f"{self.tensor.name}[{', '.join(map(repr, self.indices))}]"


@dataclass(frozen=True, eq=False)
class Reduce(Expr):
    """``sum``/``max``/``min`` of ``body`` over ``axes`` (reduce IterVars)."""

    op: str
    body: Expr
    axes: tuple[IterVar, ...]

    @property
    def dtype(self) -> str:  # type: ignore[override]
        return self.body.dtype

    def __repr__(self) -> str:
        return f"{self.op}({self.body!r}, axis=[{', '.join(a.name for a in self.axes)}])"


@dataclass(frozen=True, eq=False)
class AluCall(Expr):
    """A registered accelerator ALU op (``isa.register_alu_op``) applied to ``a`` and ``b`` (int32)."""

    op: str
    a: Expr
    b: Expr
    dtype: str = "int32"

    def __repr__(self) -> str:
        return f"{self.op}({self.a!r}, {self.b!r})"


def alu(op: str, a: ExprLike, b: ExprLike) -> AluCall:
    """Apply the ALU op registered as ``op`` (looked up in ``isa``'s registry) elementwise."""
    from isa.alu import alu_op

    try:
        name = alu_op(op).name
    except Exception as exc:  # EncodingError lists the known ops
        raise TeError(str(exc)) from None
    return AluCall(name, as_expr(a), as_expr(b))


def cast(dtype: str, a: ExprLike) -> Cast:
    """Convert to ``dtype`` (integers wrap like numpy ``astype``; float to int truncates toward zero)."""
    if dtype not in DTYPES:
        raise TeError(f"unsupported dtype {dtype!r}; dtypes: {DTYPES} (float32 only on the CPU/GPU targets)")
    return Cast(dtype, as_expr(a))


def _reduce_or_binary(op: str, a: ExprLike, b: ExprLike | None, axis) -> Expr:
    if axis is not None:
        if b is not None:
            raise TeError(f"{op}: give either a second operand (elementwise) or axis= (reduction), not both")
        axes = tuple(axis) if isinstance(axis, (list, tuple)) else (axis,)
        for x in axes:
            if not isinstance(x, IterVar) or x.kind != "reduce":
                raise TeError(f"{op}: {x!r} is not a reduce axis; make one with te.reduce_axis(extent, name)")
        return Reduce(op, as_expr(a), axes)
    if b is None:
        raise TeError(f"{op}: needs a second operand, or axis= for a reduction")
    return Binary(op, as_expr(a), as_expr(b))


def min_(a: ExprLike, b: ExprLike | None = None, axis=None) -> Expr:
    """Elementwise ``min(a, b)``, or with ``axis=`` the minimum of ``a`` over reduce axes."""
    return _reduce_or_binary("min", a, b, axis)


def max_(a: ExprLike, b: ExprLike | None = None, axis=None) -> Expr:
    """Elementwise ``max(a, b)``, or with ``axis=`` the maximum of ``a`` over reduce axes."""
    return _reduce_or_binary("max", a, b, axis)


def _math(name: str):
    def fn(a: ExprLike) -> Call:
        x = as_expr(a)
        if not is_float(x.dtype):
            x = Cast("float32", x)
        return Call(name, x)
    fn.__name__ = name
    fn.__doc__ = f"float32 ``{name}`` of ``a`` (integers are converted to float32 first)."
    return fn


exp, log, sqrt, tanh, abs_, floor, round_, erf, sin, cos = (_math(n) for n in MATH_FUNCS)


def clip(a: ExprLike, lo: int, hi: int) -> Binary:
    """``min(max(a, lo), hi)``."""
    if lo > hi:
        raise TeError(f"clip: lower bound {lo} > upper bound {hi}")
    return min_(max_(a, lo), hi)


def select(cond: Expr, a: ExprLike, b: ExprLike) -> Select:
    """``a`` where ``cond`` holds, else ``b``."""
    return Select(as_expr(cond), as_expr(a), as_expr(b))


def reduce_axis(extent: int, name: str = "k") -> IterVar:
    """A reduction axis ``0 <= name < extent``."""
    return IterVar(name, extent, "reduce")


def sum_(body: Expr, axis: IterVar | list[IterVar] | tuple[IterVar, ...]) -> Reduce:
    """Sum ``body`` over reduce axes."""
    axes = tuple(axis) if isinstance(axis, (list, tuple)) else (axis,)
    for a in axes:
        if not isinstance(a, IterVar) or a.kind != "reduce":
            raise TeError(f"sum: {a!r} is not a reduce axis; make one with te.reduce_axis(extent, name)")
    return Reduce("sum", as_expr(body), axes)


def children(e: Expr) -> tuple[Expr, ...]:
    if isinstance(e, (Binary, AluCall)):
        return (e.a, e.b)
    if isinstance(e, (Cast, Call)):
        return (e.a,)
    if isinstance(e, Select):
        return (e.cond, e.a, e.b)
    if isinstance(e, Load):
        return e.indices
    if isinstance(e, Reduce):
        return (e.body,)
    return ()


def walk(e: Expr):
    """All nodes of ``e``, pre-order."""
    stack = [e]
    while stack:
        n = stack.pop()
        yield n
        stack.extend(reversed(children(n)))


def loads(e: Expr) -> list[Load]:
    return [n for n in walk(e) if isinstance(n, Load)]
