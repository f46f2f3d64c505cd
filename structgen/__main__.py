"""``python -m structgen …``: the same commands as the ``structgen`` script."""

from structgen.cli import main

raise SystemExit(main())
