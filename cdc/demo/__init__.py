"""A deterministic crawl that reads like real pages, for the dashboard's demo store and the
benchmarks."""
