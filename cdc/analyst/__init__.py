"""The analyst's questions of a store: pages, generations and comparisons as library types
(`queries`), boilerplate across hosts, search by words and watches, annotations."""
