"""heap_frozen: the process's objects stay out of collections until the last open block ends."""

from __future__ import annotations

import gc
import threading

from provisioner.heap import heap_frozen


def test_the_heap_thaws_only_when_the_last_block_ends_nested_or_in_another_thread():
    assert gc.get_freeze_count() == 0
    frozen_in_the_other_thread: list[bool] = []
    with heap_frozen():
        with heap_frozen():
            assert gc.get_freeze_count() > 0
        assert gc.get_freeze_count() > 0  # the outer block still holds it
        entered, left = threading.Event(), threading.Event()

        def other_thread() -> None:
            with heap_frozen():
                entered.set()
                left.wait(timeout=30)
                frozen_in_the_other_thread.append(gc.get_freeze_count() > 0)

        thread = threading.Thread(target=other_thread)
        thread.start()
        entered.wait(timeout=30)
    assert gc.get_freeze_count() > 0  # this thread's blocks ended; the other's holds it
    left.set()
    thread.join()
    assert frozen_in_the_other_thread == [True]
    assert gc.get_freeze_count() == 0
