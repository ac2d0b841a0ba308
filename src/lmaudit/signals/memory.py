"""Run batches within the accelerator's memory: a batch that runs out of memory is split in halves and retried, and
every later batch is cut to the size that fitted, so a token budget set too high slows a run down instead of ending it."""

from __future__ import annotations

from collections import deque
from collections.abc import Callable, Sequence
from typing import TypeVar

import torch

from lmaudit.errors import InputError

Item = TypeVar("Item")


def is_out_of_memory(error: BaseException) -> bool:
    """A CUDA out-of-memory error, or a CPU or MPS allocation failure."""
    if isinstance(error, torch.cuda.OutOfMemoryError):
        return True
    return isinstance(error, RuntimeError) and any(text in str(error) for text in ("can't allocate memory", "out of memory"))


def run_backing_off(batches: Sequence[Sequence[Item]], run: Callable[[Sequence[Item]], None],
                    describe: Callable[[Item], str]) -> None:
    """Call `run` on every batch, splitting on out-of-memory errors; `run` must write its results only when it returns.
    A single item that does not fit is an InputError naming it (`describe`)."""
    limit: int | None = None
    queue = deque(batches)
    while queue:
        batch = queue.popleft()
        if limit is not None and len(batch) > limit:
            queue.extendleft(reversed([batch[i : i + limit] for i in range(0, len(batch), limit)]))
            continue
        try:
            run(batch)
        except (torch.cuda.OutOfMemoryError, RuntimeError) as error:
            if not is_out_of_memory(error):
                raise
            if len(batch) == 1:
                raise InputError(f"{describe(batch[0])} does not fit in memory even alone; give --max-length, "
                                 "--dtype bf16, --device-map auto or a smaller --batch-tokens") from None
            if torch.cuda.is_available():
                torch.cuda.empty_cache()
            limit = len(batch) // 2
            queue.appendleft(batch)
