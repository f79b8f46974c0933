"""``node.kernels.frozen_heap``: the objects alive before training are left out of collections while it runs, and only
then; garbage made meanwhile is still collected."""

from __future__ import annotations

import gc
import weakref

import pytest

from fgbdt_chain.node.kernels.frozen_heap import frozen_heap


class _Cycle:
    def __init__(self) -> None:
        self.me = self


def test_the_heap_is_frozen_inside_the_block_and_given_back_after() -> None:
    assert gc.get_freeze_count() == 0
    with frozen_heap():
        assert gc.get_freeze_count() > 0
        made = _Cycle()  # a cycle made during training is collected while the heap is frozen
        ref = weakref.ref(made)
        del made
        gc.collect()
        assert ref() is None
    assert gc.get_freeze_count() == 0


def test_an_error_inside_the_block_still_unfreezes() -> None:
    with pytest.raises(RuntimeError), frozen_heap():
        raise RuntimeError("training failed")
    assert gc.get_freeze_count() == 0


def test_a_caller_that_froze_objects_keeps_them_frozen() -> None:
    gc.freeze()
    try:
        before = gc.get_freeze_count()
        with frozen_heap():
            pass
        assert gc.get_freeze_count() == before
    finally:
        gc.unfreeze()


def test_nothing_is_frozen_where_the_collector_is_off() -> None:
    gc.disable()
    try:
        with frozen_heap():
            assert gc.get_freeze_count() == 0
    finally:
        gc.enable()
