"""The pipeline from records to the store: a page's history from its fetches (`versions`),
batches and their writer hand-off (`batches`, `ingester`), what a batch reads back
(`histories`), the cluster (`observations`, `cluster`), live fetching, the Parquet lake and
`migrate`."""
