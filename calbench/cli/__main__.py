"""``python -m calbench.cli``: the ``calbench`` command."""

from calbench.cli import main

main()
