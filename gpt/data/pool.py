"""Work over a corpus in forked processes, in order: `fn(context, item)` for each item, the results in the items'
order whatever the number of processes, so preparation is byte-identical on 1 or 16 of them. The context (the
recipe, the tokenizer) reaches each worker once, when it starts, rather than with every item."""
from __future__ import annotations

import multiprocessing
from collections.abc import Callable, Iterable, Iterator
from concurrent.futures import ProcessPoolExecutor
from concurrent.futures.process import BrokenProcessPool
from contextlib import contextmanager
from functools import partial
from typing import Any, TypeVar

Context, Item, Result = TypeVar("Context"), TypeVar("Item"), TypeVar("Result")
Mapper = Callable[[Iterable[Item]], Iterator[Result]]

_context: Any = None  # in a worker process only: the context it was started with


def _start(context: Any) -> None:
    global _context
    _context = context


def _call(fn: Callable[[Any, Item], Result], item: Item) -> Result:
    return fn(_context, item)


@contextmanager
def ordered_map(fn: Callable[[Context, Item], Result], context: Context, num_proc: int,
                items: int) -> Iterator[Mapper]:
    """A function mapping `fn` with `context` over items, in order, in up to num_proc forked processes (`fn` must
    be module-level, to reach them); in this process when one is enough. `items` is how many there will be."""
    if num_proc <= 1 or items <= 1:
        yield lambda many: (fn(context, item) for item in many)
        return
    # fork: the workers inherit the context as it is now (no pickling of tokenizers) and the caller's imports. An
    # executor, not a multiprocessing.Pool: a Pool whose worker is killed (the kernel's OOM killer) waits forever for
    # that worker's item, holding the preparation's lock, where an executor raises BrokenProcessPool.
    pool = ProcessPoolExecutor(min(num_proc, items), multiprocessing.get_context("fork"), _start, (context,))
    try:
        yield lambda many: _unbroken(pool.map(partial(_call, fn), many))
    finally:
        pool.shutdown(cancel_futures=True)  # after a failure, the items not started are dropped, not worked through


def _unbroken(results: Iterator[Result]) -> Iterator[Result]:
    try:
        yield from results
    except BrokenProcessPool:
        raise ValueError("a process preparing the corpus died (killed, most likely for memory): run again with fewer "
                         "processes (data.num_proc, or prepare's --num-proc)") from None
