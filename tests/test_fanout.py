"""scaler.fanout.Pool on an embedded Ray: the shared input reaches each worker process once, and
what a task reports reaches the driver's progress callback (the replay's and tune's progress
bars; tests/test_replay_cli.py draws them from one process)."""

from __future__ import annotations

import os
import sys
import uuid
from typing import Any

from scaler.fanout import Pool


def _where(shared: Any, item: int, report: Any) -> tuple[int, str, int]:
    report("step", item, 3)
    report("step", item, 4)
    return os.getpid(), shared.token, item * 2


def test_each_worker_deserializes_the_shared_input_once_and_results_keep_item_order() -> None:
    class Shared:
        """Gets a new token each time it is deserialized."""

        def __init__(self) -> None:
            self.token = "driver"

        def __setstate__(self, state: dict[str, Any]) -> None:
            self.token = uuid.uuid4().hex

    from ray import cloudpickle

    # The Ray workers cannot import this test module: ship its functions and classes by value.
    cloudpickle.register_pickle_by_value(sys.modules[__name__])
    reports: list[tuple[Any, ...]] = []
    with Pool(Shared(), workers=2, progress=lambda *m: reports.append(m)) as pool:
        done = pool.map(_where, list(range(8)))
    assert [d.result[2] for d in done] == [i * 2 for i in range(8)]
    # Every report, with its task's index, in each task's own order.
    assert sorted(reports) == sorted((i, "step", i, n) for i in range(8) for n in (3, 4))
    for i in range(8):
        assert [m[3] for m in reports if m[0] == i] == [3, 4]
    tokens_by_pid: dict[int, set[str]] = {}
    for d in done:
        pid, token, _ = d.result
        tokens_by_pid.setdefault(pid, set()).add(token)
    assert all(len(tokens) == 1 for tokens in tokens_by_pid.values()), tokens_by_pid
    assert "driver" not in {t for tokens in tokens_by_pid.values() for t in tokens}
