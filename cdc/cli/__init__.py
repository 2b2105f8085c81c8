"""The `cdc` command line: the parser and the smaller commands in `main`, one module per
command group beside it, and what they share in `common`."""
