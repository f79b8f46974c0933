"""Training without the interpreter re-scanning every object it held before: ``gc.freeze`` for the duration.

Why: a process that has loaded numba, numpy and the data holds some 280,000 tracked objects. CPython's oldest
garbage collection scans all of them, and training allocates enough to trigger it: about once per five seconds of
``simulate`` on a9a, 0.18-0.20 s each (measured with ``gc.callbacks``), 4% of the train time. The objects that
existed before training are not what training turns into garbage, so they are set aside while it runs
(``gc.freeze``) and given back to the collector after (``gc.unfreeze``); garbage made during training is collected
as usual, and any of the earlier objects that became garbage meanwhile is collected by the next full collection.
"""

from __future__ import annotations

import contextlib
import gc
from collections.abc import Iterator


@contextlib.contextmanager
def frozen_heap() -> Iterator[None]:
    """The objects alive now left out of garbage collections until the block ends. A caller that froze objects
    of its own keeps managing them: nothing is frozen or unfrozen then."""
    if gc.get_freeze_count() > 0 or not gc.isenabled():
        yield
        return
    gc.freeze()
    try:
        yield
    finally:
        gc.unfreeze()
