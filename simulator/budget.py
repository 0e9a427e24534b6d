"""The simulator's cycle budget and progress display for long programs.

Before a run, :func:`cycle_floor` bounds the program's cycles from below (each unit runs its
instructions one after another, so the busiest unit's summed durations is a floor); a floor
above the budget is rejected before any work, naming the longest instructions. The timing
engine also stops when simulated time passes the budget (stalls can add cycles the floor
does not see). Programs whose floor passes :data:`PROGRESS_MIN_CYCLES` show a progress bar.
"""
from __future__ import annotations

from typing import Callable

from simulator.errors import BudgetError
from simulator.program import UNITS, InsnInfo

#: Default cycle budget: 2^27 cycles (~1.3 s of hardware time at 100 MHz; a full-size ResNet-50 layer at batch 32
#: on pynq-z1 needs ~30M). One ALU instruction of 16383 x 16383 iterations (~268M cycles, ~27 minutes of host
#: time) is over it.
DEFAULT_MAX_CYCLES = 1 << 27
#: Programs with at least this many cycles (floor) show progress when progress is automatic.
PROGRESS_MIN_CYCLES = 50_000_000


def cycle_floor(infos: list[InsnInfo]) -> int:
    """A lower bound on the program's cycles: the largest per-unit sum of instruction durations."""
    per_unit = [0, 0, 0]
    for info in infos:
        per_unit[info.unit] += info.dur
    return max(per_unit)


def check_budget(infos: list[InsnInfo], max_cycles: int | None) -> int:
    """The cycle floor of ``infos``; raises :class:`BudgetError` if it exceeds ``max_cycles`` (None: no limit)."""
    floor = cycle_floor(infos)
    if max_cycles is not None and floor > max_cycles:
        top = sorted(range(len(infos)), key=lambda i: -infos[i].dur)[:3]
        worst = ", ".join(f"instruction {i} ({infos[i].kind}, {infos[i].dur:,} cycles on the {UNITS[infos[i].unit]} unit)"
                          for i in top)
        raise BudgetError(f"the program needs at least {floor:,} cycles, over the simulator budget of {max_cycles:,} "
                          f"(max_cycles); longest: {worst}. Shrink the loops or raise max_cycles")
    return floor


def past_budget(t: int, max_cycles: int) -> BudgetError:
    return BudgetError(f"the run passed the simulator budget of {max_cycles:,} cycles at cycle {t:,} (max_cycles); "
                       f"stalls made it longer than its instructions alone")


def with_progress(execute: Callable[[int], None], infos: list[InsnInfo], floor: int,
                  show: bool | None) -> tuple[Callable[[int], None], Callable[[], None]]:
    """Wrap ``execute`` to advance a progress bar (summed instruction cycles) when the program is long (``floor``
    cycles or more, or ``show=True``); returns the wrapped function and a function closing the bar."""
    if show is False or (show is None and floor < PROGRESS_MIN_CYCLES):
        return execute, lambda: None
    from tqdm.auto import tqdm

    bar = tqdm(total=sum(info.dur for info in infos), desc="simulate", unit="cyc", unit_scale=True, leave=False, mininterval=0.5)

    def run(i: int) -> None:
        execute(i)
        bar.update(infos[i].dur)
    return run, bar.close
