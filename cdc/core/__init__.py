"""The algorithm: normalise a page's text, cut it into chunks with a rolling hash, compare
two versions' chunks, and narrow the changed stretches to exact edits and moves. The
compiled kernels live here too (`compiled`, `aot`). Imports nothing of cdc but `errors` and
`runtime`."""
