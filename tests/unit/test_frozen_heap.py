"""The garbage-collector policy of a run (:func:`sim.engine.base.frozen_heap`)."""

from __future__ import annotations

import gc

from sim.engine.base import GC_YOUNG, frozen_heap


def test_frozen_heap_raises_the_young_threshold_and_restores_the_collector() -> None:
    before = gc.get_threshold()
    gc.set_threshold(700, before[1], before[2])
    try:
        with frozen_heap():
            assert gc.get_threshold() == (GC_YOUNG, before[1], before[2])
            assert gc.get_freeze_count() > 0
        assert gc.get_threshold() == (700, before[1], before[2])
        assert gc.get_freeze_count() == 0
    finally:
        gc.set_threshold(*before)


def test_frozen_heap_keeps_a_larger_young_threshold_and_restores_it_after_an_error() -> None:
    before = gc.get_threshold()
    gc.set_threshold(4 * GC_YOUNG, before[1], before[2])
    try:
        try:
            with frozen_heap():
                assert gc.get_threshold()[0] == 4 * GC_YOUNG
                raise RuntimeError("a run that fails")
        except RuntimeError:
            pass
        assert gc.get_threshold()[0] == 4 * GC_YOUNG
        assert gc.get_freeze_count() == 0
    finally:
        gc.set_threshold(*before)
