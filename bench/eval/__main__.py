"""``python -m bench.eval``: see ``bench.eval.cli``."""

from bench.eval.cli import main

raise SystemExit(main())
