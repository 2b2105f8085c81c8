"""`python -m cdc` is the `cdc` command."""

from cdc.cli.main import main

raise SystemExit(main())
