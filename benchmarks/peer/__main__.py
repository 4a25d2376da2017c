"""``python -m benchmarks.peer``: see :mod:`benchmarks.peer.run`."""

from benchmarks.peer.run import main

raise SystemExit(main())
