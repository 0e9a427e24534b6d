"""``HwConfig``: the parameters of one accelerator instance and everything derived from them.

Every other package reads sizes, widths and depths from here; nothing hard-codes them.
"""
from __future__ import annotations

import dataclasses
import json
import math
from dataclasses import dataclass, fields
from importlib import resources
from pathlib import Path
from typing import Any

from isa.errors import ConfigError

#: Instruction words are 128 bits; a micro-op is 32 bits.
INSN_BITS = 128
UOP_BITS = 32
#: Widths (bits) allowed for the data types; numpy has a dtype for each.
ALLOWED_DATA_WIDTHS = (8, 16, 32)


#: Highest accepted clock (MHz): far above any FPGA, low enough to catch unit mistakes (Hz for MHz).
MAX_CLOCK_MHZ = 10_000.0
#: The key of a config JSON file naming the preset its missing fields come from.
BASE_KEY = "base"


def _is_pow2(n: int) -> bool:
    return n > 0 and (n & (n - 1)) == 0


def check_field_types(cfg: "HwConfig") -> None:
    """Every field has its declared type: ints are ints (not bools or 8.0), ``clock_mhz`` a finite number,
    strings are strings. Raises :class:`ConfigError` listing every field of the wrong type."""
    bad = []
    for f in fields(cfg):
        v = getattr(cfg, f.name)
        if f.type == "int":
            ok, want = isinstance(v, int) and not isinstance(v, bool), "an integer"
        elif f.type == "float":
            ok = isinstance(v, (int, float)) and not isinstance(v, bool) and math.isfinite(v)
            want = "a finite number"
        else:
            ok, want = isinstance(v, str), "a string"
        if not ok:
            bad.append(f"{f.name} = {v!r} ({type(v).__name__}) must be {want}")
    if bad:
        raise ConfigError("HwConfig: " + "; ".join(bad))


@dataclass(frozen=True)
class HwConfig:
    """A VTA-style accelerator configuration.

    Sizes are powers of two; ``*_buff_size`` are scratchpad capacities in bytes.
    """

    name: str = "custom"
    log_batch: int = 0
    log_block_in: int = 4
    log_block_out: int = 4
    inp_width: int = 8
    wgt_width: int = 8
    acc_width: int = 32
    out_width: int = 8
    uop_buff_size: int = 32 * 1024
    inp_buff_size: int = 32 * 1024
    wgt_buff_size: int = 256 * 1024
    acc_buff_size: int = 128 * 1024
    bus_width: int = 64
    clock_mhz: float = 100.0
    dram_latency: int = 32
    cmd_queue_depth: int = 8
    dep_queue_depth: int = 64
    fetch_burst: int = 8
    gemm_pipeline: int = 4
    alu_pipeline: int = 4
    fpga_part: str = ""

    # ------------------------------------------------------------------ checks
    def __post_init__(self) -> None:
        def need(cond: bool, field: str, msg: str) -> None:
            if not cond:
                raise ConfigError(f"HwConfig.{field} = {getattr(self, field)!r}: {msg}")

        check_field_types(self)

        for f in ("log_batch", "log_block_in", "log_block_out"):
            v = getattr(self, f)
            need(isinstance(v, int) and 0 <= v <= 6, f, "must be an integer in 0..6 (1..64 lanes)")
        for f in ("inp_width", "wgt_width", "out_width", "acc_width"):
            need(getattr(self, f) in ALLOWED_DATA_WIDTHS, f, f"must be one of {ALLOWED_DATA_WIDTHS} bits")
        need(self.acc_width >= max(self.inp_width, self.wgt_width), "acc_width",
             f"must be >= inp_width and wgt_width ({max(self.inp_width, self.wgt_width)})")
        need(self.out_width <= self.acc_width, "out_width", f"must be <= acc_width ({self.acc_width})")
        need(isinstance(self.bus_width, int) and _is_pow2(self.bus_width) and 32 <= self.bus_width <= 512,
             "bus_width", "must be a power of two in 32..512 bits")
        for f in ("uop_buff_size", "inp_buff_size", "wgt_buff_size", "acc_buff_size"):
            need(isinstance(getattr(self, f), int) and _is_pow2(getattr(self, f)), f,
                 "must be a power of two number of bytes")
        # one element (tile) of each scratchpad must fit, and at least two of them (double buffering)
        for mem, elem in (("uop", UOP_BITS // 8), ("inp", self.inp_elem_bytes),
                          ("wgt", self.wgt_elem_bytes), ("acc", self.acc_elem_bytes)):
            need(getattr(self, f"{mem}_buff_size") >= 2 * elem, f"{mem}_buff_size",
                 f"must hold at least 2 elements of {elem} bytes (>= {2 * elem})")
        need(0 < self.clock_mhz <= MAX_CLOCK_MHZ, "clock_mhz", f"must be a finite number of MHz in (0, {MAX_CLOCK_MHZ:g}]")
        need(isinstance(self.dram_latency, int) and 3 <= self.dram_latency <= 4096, "dram_latency",
             "must be an integer number of cycles in 3..4096 (the RTL's STORE needs >= 3, docs/timing.md)")
        need(isinstance(self.cmd_queue_depth, int) and 1 <= self.cmd_queue_depth <= 1024, "cmd_queue_depth", "must be in 1..1024")
        need(isinstance(self.dep_queue_depth, int) and 1 <= self.dep_queue_depth <= 65535, "dep_queue_depth", "must be in 1..65535")
        need(isinstance(self.fetch_burst, int) and 1 <= self.fetch_burst <= 256, "fetch_burst", "must be in 1..256 instructions")
        need(isinstance(self.gemm_pipeline, int) and 2 <= self.gemm_pipeline <= 16, "gemm_pipeline", "must be in 2..16 cycles (register stages: micro-op read, then operand read + write at least)")
        need(isinstance(self.alu_pipeline, int) and 2 <= self.alu_pipeline <= 16, "alu_pipeline", "must be in 2..16 cycles (register stages: micro-op read, then operand read + write at least)")
        # a micro-op packs three scratchpad indices into 32 bits
        uop_bits = self.uop_dst_bits + self.uop_src_bits + self.uop_wgt_bits
        if uop_bits > UOP_BITS:
            raise ConfigError(
                f"HwConfig: a micro-op needs {self.uop_dst_bits} (acc index) + {self.uop_src_bits} (inp/acc index) + "
                f"{self.uop_wgt_bits} (wgt index) = {uop_bits} bits > {UOP_BITS}; shrink acc_buff_size, "
                f"inp_buff_size or wgt_buff_size")
        # instruction fields must fit the 128-bit word; checked by building the layouts
        from isa.encoding import layouts  # local import: encoding derives from config

        layouts(self)

    # --------------------------------------------------------------- lanes
    @property
    def batch(self) -> int:
        return 1 << self.log_batch

    @property
    def block_in(self) -> int:
        return 1 << self.log_block_in

    @property
    def block_out(self) -> int:
        return 1 << self.log_block_out

    # ---------------------------------------------------------- element sizes
    @property
    def inp_elem_bytes(self) -> int:
        return self.batch * self.block_in * self.inp_width // 8

    @property
    def wgt_elem_bytes(self) -> int:
        return self.block_out * self.block_in * self.wgt_width // 8

    @property
    def acc_elem_bytes(self) -> int:
        return self.batch * self.block_out * self.acc_width // 8

    @property
    def out_elem_bytes(self) -> int:
        return self.batch * self.block_out * self.out_width // 8

    @property
    def uop_elem_bytes(self) -> int:
        return UOP_BITS // 8

    def elem_bytes(self, mem: str) -> int:
        """Bytes of one scratchpad element of memory ``mem`` (uop, inp, wgt, acc, out)."""
        return getattr(self, f"{mem}_elem_bytes")

    # ---------------------------------------------------------------- depths
    @property
    def uop_depth(self) -> int:
        return self.uop_buff_size // self.uop_elem_bytes

    @property
    def inp_depth(self) -> int:
        return self.inp_buff_size // self.inp_elem_bytes

    @property
    def wgt_depth(self) -> int:
        return self.wgt_buff_size // self.wgt_elem_bytes

    @property
    def acc_depth(self) -> int:
        return self.acc_buff_size // self.acc_elem_bytes

    @property
    def out_depth(self) -> int:
        """The out scratchpad mirrors acc (narrowed), so it has the same depth."""
        return self.acc_depth

    def depth(self, mem: str) -> int:
        return getattr(self, f"{mem}_depth")

    # ---------------------------------------------------------- index widths
    @staticmethod
    def _bits(n: int) -> int:
        return max(1, math.ceil(math.log2(n)))

    @property
    def uop_idx_bits(self) -> int:
        return self._bits(self.uop_depth)

    @property
    def inp_idx_bits(self) -> int:
        return self._bits(self.inp_depth)

    @property
    def wgt_idx_bits(self) -> int:
        return self._bits(self.wgt_depth)

    @property
    def acc_idx_bits(self) -> int:
        return self._bits(self.acc_depth)

    @property
    def sram_idx_bits(self) -> int:
        """Width of a LOAD/STORE scratchpad base: wide enough for the deepest scratchpad."""
        return max(self.uop_idx_bits, self.inp_idx_bits, self.wgt_idx_bits, self.acc_idx_bits)

    @property
    def uop_dst_bits(self) -> int:
        return self.acc_idx_bits

    @property
    def uop_src_bits(self) -> int:
        """GEMM reads inp at the src index, ALU reads acc there: wide enough for both."""
        return max(self.inp_idx_bits, self.acc_idx_bits)

    @property
    def uop_wgt_bits(self) -> int:
        return self.wgt_idx_bits

    # ------------------------------------------------------------ throughput
    @property
    def bus_bytes(self) -> int:
        return self.bus_width // 8

    @property
    def macs_per_cycle(self) -> int:
        return self.batch * self.block_in * self.block_out

    @property
    def peak_gops(self) -> float:
        """2 ops (multiply + add) per MAC per cycle at ``clock_mhz``."""
        return round(2 * self.macs_per_cycle * self.clock_mhz / 1000.0, 6)

    @property
    def dram_bytes_per_cycle(self) -> int:
        return self.bus_bytes

    # ------------------------------------------------------------------- io
    def to_dict(self) -> dict[str, Any]:
        return dataclasses.asdict(self)

    def to_json(self, path: str | Path | None = None) -> str:
        text = json.dumps(self.to_dict(), indent=2) + "\n"
        if path is not None:
            Path(path).write_text(text)
        return text

    def derived(self) -> dict[str, Any]:
        """The derived quantities, as a flat dict (for reports)."""
        keys = ["batch", "block_in", "block_out", "inp_elem_bytes", "wgt_elem_bytes", "acc_elem_bytes",
                "out_elem_bytes", "uop_depth", "inp_depth", "wgt_depth", "acc_depth", "out_depth",
                "uop_idx_bits", "inp_idx_bits", "wgt_idx_bits", "acc_idx_bits", "bus_bytes",
                "macs_per_cycle", "peak_gops"]
        return {k: getattr(self, k) for k in keys}

    def replace(self, **overrides: Any) -> "HwConfig":
        return make_config(self, **overrides)

    @classmethod
    def from_preset(cls, name: str, **overrides: Any) -> "HwConfig":
        return make_config(name, **overrides)

    @classmethod
    def from_json(cls, path: str | Path, **overrides: Any) -> "HwConfig":
        return make_config(Path(path), **overrides)


_FIELDS = {f.name for f in fields(HwConfig)}


def preset_names() -> list[str]:
    """Names of the presets shipped in ``isa/presets``."""
    return sorted(p.name[:-5] for p in resources.files("isa.presets").iterdir() if p.name.endswith(".json"))


def _from_dict(data: dict[str, Any], origin: str) -> HwConfig:
    unknown = sorted(set(data) - _FIELDS)
    if unknown:
        raise ConfigError(f"{origin}: unknown HwConfig field(s) {unknown}; allowed: {sorted(_FIELDS)}")
    try:
        return HwConfig(**data)
    except ConfigError as exc:
        raise ConfigError(f"{origin}: {exc}") from None


def _preset_data(name: str) -> dict[str, Any]:
    return json.loads(resources.files("isa.presets").joinpath(f"{name}.json").read_text())


def _file_data(path: Path, text: str) -> dict[str, Any]:
    """A config file's fields: a JSON object listing every field, or naming a ``"base"`` preset for the rest."""
    if not path.is_file():
        raise ConfigError(f"config file {text!r} does not exist")
    try:
        data = json.loads(path.read_text(), parse_constant=_reject_constant)
    except (json.JSONDecodeError, UnicodeDecodeError, ValueError) as exc:
        raise ConfigError(f"config file {text!r} is not valid JSON: {exc}") from None
    if not isinstance(data, dict):
        raise ConfigError(f"config file {text!r} must hold a JSON object of HwConfig fields, got {type(data).__name__}")
    base = data.pop(BASE_KEY, None)
    if base is not None:
        if not isinstance(base, str) or base not in preset_names():
            raise ConfigError(f"config file {text!r}: {BASE_KEY!r} = {base!r} must name a preset: "
                              f"{', '.join(preset_names())}")
        return {**_preset_data(base), **data}
    missing = [f.name for f in fields(HwConfig) if f.name not in data]
    if missing:
        raise ConfigError(f"config file {text!r} lacks field(s) {missing}: list every field, or add "
                          f'"{BASE_KEY}": "<preset>" to take the missing ones from a preset ({", ".join(preset_names())})')
    return data


def _reject_constant(name: str) -> None:
    raise ValueError(f"{name} is not a number a config may hold (JSON has no NaN/Infinity)")


def make_config(source: "HwConfig | str | Path | dict | None" = None, **overrides: Any) -> HwConfig:
    """Build a config from a preset name, a JSON file, a dict or another config, plus keyword overrides."""
    if source is None:
        source = "pynq-z1"
    if not isinstance(source, (HwConfig, dict, str, Path)):
        raise ConfigError(f"a config source must be a preset name, a JSON file path, a dict or an HwConfig; "
                          f"got {type(source).__name__}")
    if isinstance(source, HwConfig):
        data, origin = source.to_dict(), f"config {source.name!r}"
    elif isinstance(source, dict):
        data, origin = dict(source), "dict"
    else:
        text = str(source)
        path = Path(text)
        if text in preset_names():
            data = _preset_data(text)
            origin = f"preset {text!r}"
        elif path.suffix == ".json" or path.exists():
            data = _file_data(path, text)
            origin = f"file {text!r}"
        else:
            raise ConfigError(f"unknown preset {text!r}; presets: {', '.join(preset_names())} (or give a .json file)")
    data.update(overrides)
    return _from_dict(data, origin)
