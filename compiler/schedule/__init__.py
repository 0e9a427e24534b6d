"""Schedule primitives: split, tile, reorder, fuse, compute_at, cache_read/write, tensorize, vthread, pragmas."""
from compiler.schedule.errors import ScheduleError
from compiler.schedule.schedule import Schedule, create_schedule
from compiler.schedule.stage import Stage

__all__ = ["ScheduleError", "Schedule", "Stage", "create_schedule"]
