"""Crawl output in: one door (`inputs.open_crawl_input`) that sniffs a file once and yields
its records, whatever the format (JSON Lines, WARC, ARC, WET), with HTML extraction."""
