"""`python -m cdc` is the `cdc` command."""

from cdc.cli import main

raise SystemExit(main())
