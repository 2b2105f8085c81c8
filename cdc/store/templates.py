"""Each host's template and the change rows' template-only flags, stored and kept right.

A host's template (`host_templates`) is the seed's boilerplate rule, a digest on at least
`BOILERPLATE_MIN_PAGES` pages and on more than `BOILERPLATE_SHARE` of the host's pages,
counted over every retained generation of its pages rather than the latest alone, so that
the navigation a site-wide change replaced still counts as template on the old side. A change
row is template-only (`changes.template_only`) when every changed block is its host's
template: some chunk digest's count differs between its two generations (added, removed, or
one copy of a repeated chunk more or fewer), and the page's own chunks (those not in the
template), in their order, are the same on both sides. The order counts because a moved
paragraph changes no count: a page whose own paragraph moved is the page's own change, even
when the same run brought it the host's new banner. One more case is template-only: beside
a template change, one block of the page's own lost and one gained, with the page's own
words the same (a text's last block has no line end, so a page whose own text is its title
gains one when the new banner follows it: `LINE_END_CHECK`, the one case whose texts are
read). NULL (unknown) for a first sighting, or where either generation's chunk list is no
longer retained. A template-only row also names its edit
(`changes.template_edit`, the digest of those count differences): the pages of a host that
carry one edit of its template share it, which is what a site diff groups them by.

Both are computed from the retained chunk lists, so they are refreshed wherever those lists,
or a host's pages, change, in the same transaction: at a run's end after its retention trim
(the hosts the run touched), by `prune`, `migrate` and `erase`, and by the schema upgrade.
Then, after each of those, every stored flag equals its recomputation from the store as it
is: the template as it is then, right once the whole crawl is in. (Between a run's batches,
its new rows have no flag yet; a killed run's rows get theirs at the next run's end.) A
refresh reads every retained chunk of the hosts it counts once (the template), then only the
rows whose flag can have changed: the rows of the changed pages that have no flag yet (new,
or measured again), those whose older side the trim dropped (unknown now), and every row of
a page of those hosts that holds a digest that entered or left the template (a steady
recrawl has none; a site-wide change, the host's).
"""

from __future__ import annotations

from collections.abc import Sequence

import duckdb
import pyarrow as pa

from cdc.core.chunks import DIGEST_SIZE, chunks_from_lengths
from cdc.core.compare import compare
from cdc.store.layout import _digests_of, digest_rows
from cdc.store.lookups import _by_key_pairs, _for_keys, _gather, _key_table, _keys_of, _registered
from cdc.store.rows import EDITS, MEASURES_SET, OWN_EDITS, Remeasured, arrow_table, report_measures

# The seed's boilerplate rule: a digest on more than this share of a host's pages (in their
# latest generations), and on at least this many of them (`cdc.analyst.boilerplate`).
BOILERPLATE_SHARE = 0.05
BOILERPLATE_MIN_PAGES = 3

# The change rows that can be flagged and are not, among the rows of `changes` with no flag
# and a generation before (`unflagged`, a scan of two narrow columns): both their
# generations' chunk lists are held, neither empty (`unflagged_lists`, looked up by key). A
# run's end adds their pages to its own, so the rows a killed run wrote are flagged by the
# next run that finishes.
UNFLAGGED_ROWS = """
    SELECT natural_key, generation, previous_generation FROM changes
    WHERE template_only IS NULL AND previous_generation IS NOT NULL"""
UNFLAGGED_LISTS = """
    SELECT natural_key, generation FROM chunk_lists
    WHERE octet_length(digests) > 0 AND natural_key IN ({keys})"""
UNFLAGGED_PAGES = """
    SELECT DISTINCT u.natural_key FROM unflagged u
    SEMI JOIN unflagged_lists n ON n.natural_key = u.natural_key AND n.generation = u.generation
    SEMI JOIN unflagged_lists o ON o.natural_key = u.natural_key AND o.generation = u.previous_generation
    ORDER BY 1"""

# The pages of the hosts in `touched_hosts`, and their chunk lists (looked up by key), with
# their host: all that a refresh reads of the chunk lists.
HOSTS_PAGES = "SELECT natural_key, host FROM pages WHERE host IN ({hosts})"
HOSTS_LISTS = """
    SELECT p.host, l.natural_key, l.generation, l.digests
    FROM chunk_lists l JOIN host_pages p USING (natural_key) WHERE l.natural_key IN ({keys})"""
# Those lists cut into a row per chunk digest once, in Arrow (`host_digests`,
# `cdc.store.layout.digest_rows`): the template, the pages a template change moved and the
# recounted rows' sides are all read from it. Cutting the BLOBs in SQL was most of what each
# of those queries cost, when each cut them again (three times 0.1-0.2 s of a run's end on
# the docs crawls); a DuckDB table of the cut rows took 250 bytes a digest, the Arrow one 44.
# Past `CUT_IN_ARROW` lists (about 500,000 digests, 22 MB of Arrow beside 8 MB of lists
# fetched) the rows are a view that cuts them in SQL where read, as before: DuckDB keeps
# within its memory limit, Python would not (the --big WARC benchmark's run ends with 10,600).
HOSTS_DIGESTS = "SELECT host, natural_key, generation, digests FROM host_lists"
CUT_IN_ARROW = 5_000
HOSTS_DIGESTS_VIEW = ("CREATE OR REPLACE TEMP VIEW host_digests AS "
                      f"SELECT * FROM {_digests_of('SELECT * FROM host_lists', in_order=True)}")
# The change rows of the pages whose flags are counted again, as they are before the refresh.
STALE_CHANGES = """
    SELECT natural_key, generation, previous_generation, template_only, template_edit, measure
    FROM changes WHERE natural_key IN ({keys})"""


def _template_digests(digests: str) -> str:
    """A host's template: its digests on at least `?` (minimum pages) and more than `?`
    (share) of the pages of the hosts in `host_size` (host, pages), counted over every
    retained generation: the chunk digests of `digests` (a relation of host, natural_key,
    digest). Each page's digests are made distinct first: a third of the cost of count(DISTINCT)."""
    return f"""
    SELECT c.host, c.digest
    FROM (SELECT DISTINCT host, natural_key, digest FROM {digests}) c
    JOIN host_size h ON h.host = c.host
    GROUP BY c.host, c.digest
    HAVING count(*) >= ? AND count(*) > ? * any_value(h.pages)
"""


# The templates of the hosts in `host_size`, from the store's tables (what the reads count)
# and from the lists a refresh gathered (`host_lists`).
TEMPLATE_DIGESTS = _template_digests(_digests_of("""
    SELECT p.host, l.natural_key, l.digests
    FROM chunk_lists l JOIN pages p ON p.natural_key = l.natural_key
    WHERE p.host IN (SELECT host FROM host_size)"""))
_GATHERED_TEMPLATE_DIGESTS = _template_digests("host_digests")

# The pages of the hosts in `host_size` that hold a digest that entered or left their
# template (`template_moves`).
_MOVED_PAGES = """
    SELECT DISTINCT c.natural_key FROM host_digests c
    SEMI JOIN template_moves m ON m.host = c.host AND m.digest = c.digest"""

# The chunk digests of the generations in `wanted`, with their host and place.
_WANTED_DIGESTS = "SELECT * FROM host_digests SEMI JOIN wanted USING (natural_key, generation)"

# The flag of every change row in `stale_changes`, and the edit a template-only
# row makes. A row is counted again when it has no flag yet (a writer inserts a row, or
# re-chunks its generations, without one) or its page holds a digest that moved in or out of
# the template (`moved_pages`); another row keeps its flag and edit, unless the trim took one
# of its generations' chunk lists (then unknown). Counted, a row is template-only when its two
# generations' digests differ as multisets while their non-template digests, in chunk order,
# do not: every changed digest is template, and none of the page's own blocks moved (a move
# changes no count, only the order). Unknown when either generation has no chunks (not retained, or
# an empty text), and for a first sighting. Its edit (`template_edit`) names that multiset
# difference, each changed digest with how many copies it gained or lost, so the pages that
# carry one edit of the template share it (the excerpts do not: the exact edits around a
# template block can take in a word of the page's own).
FRESH_FLAGS = f"""
    WITH stale_rows AS (
        SELECT natural_key, generation, previous_generation, template_only, template_edit,
               previous_generation IS NOT NULL AND (template_only IS NULL OR natural_key IN
                   (SELECT natural_key FROM moved_pages)) AS recount
        FROM stale_changes
    ),
    wanted AS (
        SELECT natural_key, generation FROM stale_rows WHERE recount
        UNION SELECT natural_key, previous_generation FROM stale_rows WHERE recount
    ),
    wanted_digests AS MATERIALIZED ({_WANTED_DIGESTS}),
    -- Each wanted generation's digests, sorted (a multiset), and its non-template ones in
    -- chunk order (a sequence: a moved own block makes two sides differ).
    sides AS (
        SELECT c.natural_key, c.generation, list_sort(list(c.digest)) AS chunks,
               coalesce(list(c.digest ORDER BY c.chunk_index) FILTER (WHERE t.digest IS NULL), []) AS rest
        FROM wanted_digests c
        LEFT JOIN host_templates t ON t.host = c.host AND t.digest = c.digest
        GROUP BY c.natural_key, c.generation
    ),
    -- Each recounted row's changed digests: copies gained (> 0) or lost (< 0).
    deltas AS (
        SELECT x.natural_key, x.generation, d.host, d.digest,
               sum(CASE WHEN d.generation = x.generation THEN 1 ELSE -1 END) AS delta
        FROM stale_rows x JOIN wanted_digests d ON d.natural_key = x.natural_key
         AND (d.generation = x.generation OR d.generation = x.previous_generation)
        WHERE x.recount
        GROUP BY ALL HAVING sum(CASE WHEN d.generation = x.generation THEN 1 ELSE -1 END) <> 0
    ),
    edits AS (
        SELECT natural_key, generation,
               md5(string_agg(hex(digest) || ':' || delta, ',' ORDER BY digest)) AS edit
        FROM deltas GROUP BY ALL
    ),
    -- Whether a template digest changed, and how many of the page's own changed: one block
    -- of its own lost and one gained, beside a template change, is what a line end moved by
    -- the template's new block looks like (`LINE_END_CHECK`).
    delta_kinds AS (
        SELECT d.natural_key, d.generation, bool_or(t.digest IS NOT NULL) AS template_changed,
               count(*) FILTER (WHERE t.digest IS NULL AND d.delta = 1) AS own_gained,
               count(*) FILTER (WHERE t.digest IS NULL AND d.delta = -1) AS own_lost,
               count(*) FILTER (WHERE t.digest IS NULL) AS own_changed
        FROM deltas d LEFT JOIN host_templates t ON t.host = d.host AND t.digest = d.digest
        GROUP BY d.natural_key, d.generation
    ),
    held AS (SELECT natural_key, generation FROM host_lists
             WHERE natural_key IN (SELECT natural_key FROM stale_changes)),
    flags AS (
        SELECT x.natural_key, x.generation, e.edit, x.template_edit AS kept_edit, x.recount,
               x.recount AND k.template_changed AND k.own_gained = 1 AND k.own_lost = 1
                   AND k.own_changed = 2 AS one_own_block,
               coalesce(x.recount AND k.template_changed, FALSE) AS template_changed,
               CASE WHEN x.recount THEN CASE WHEN n.chunks IS NOT NULL AND o.chunks IS NOT NULL
                                             THEN n.chunks <> o.chunks AND n.rest = o.rest END
                    WHEN hn.generation IS NOT NULL AND ho.generation IS NOT NULL THEN x.template_only
               END AS template_only
        FROM stale_rows x
        LEFT JOIN sides n ON n.natural_key = x.natural_key AND n.generation = x.generation
        LEFT JOIN sides o ON o.natural_key = x.natural_key AND o.generation = x.previous_generation
        LEFT JOIN held hn ON hn.natural_key = x.natural_key AND hn.generation = x.generation
        LEFT JOIN held ho ON ho.natural_key = x.natural_key AND ho.generation = x.previous_generation
        LEFT JOIN edits e ON e.natural_key = x.natural_key AND e.generation = x.generation
        LEFT JOIN delta_kinds k ON k.natural_key = x.natural_key AND k.generation = x.generation
    )
    SELECT natural_key, generation, template_only,
           CASE WHEN template_only THEN coalesce(edit, kept_edit) END AS template_edit,
           coalesce(template_only = FALSE AND one_own_block, FALSE) AS line_end_check, edit,
           recount, template_changed
    FROM flags
"""

# The rows `FRESH_FLAGS` found not template-only by one block of the page's own lost and one
# gained beside a template change, with their previous generation and host: a text's last
# block has no line end, so a page whose own text is one block (its title) gains one when
# the host's new banner comes after it, and that block's digest changes though not a word
# of the page did. `_settle_line_ends` reads their texts and counts them template-only when
# the page's own words (the text of its non-template chunks, split at whitespace) are the
# same on both sides. Only these rows' texts are read: a page with an edit of its own that
# changes more than one block is not read.
LINE_END_CHECK = """
    SELECT f.natural_key, f.generation, s.previous_generation, p.host
    FROM fresh_flags f JOIN stale_changes s USING (natural_key, generation)
    JOIN host_pages p USING (natural_key) WHERE f.line_end_check ORDER BY 1, 2"""
_CHECKED_TEXTS = """SELECT natural_key, generation, text FROM generations
                    WHERE natural_key IN ({keys}) AND (natural_key, generation) IN ({pairs})"""
_CHECKED_LISTS = """SELECT natural_key, generation, digests, lengths FROM chunk_lists
                    WHERE natural_key IN ({keys}) AND (natural_key, generation) IN ({pairs})"""
_CHECKED_TEMPLATES = "SELECT host, digest FROM host_templates WHERE list_contains(?, host)"


def _own_words(text: str, digests: bytes, lengths: Sequence[int], template: set[bytes]) -> list[bytes]:
    """The words of a generation's text outside its host's template chunks, in order."""
    return _own_part(text, digests, lengths, template)[0].split()


def _settle_line_ends(connection: duckdb.DuckDBPyConnection) -> None:
    """Set template-only, with its edit, the rows of `LINE_END_CHECK` whose page's own words
    are the same on both sides (in `fresh_flags`)."""
    rows = connection.execute(LINE_END_CHECK).fetchall()
    if not rows:
        return
    texts = _texts_and_lists(connection, rows)
    templates = _templates_of(connection, {row[3] for row in rows})
    same = [(key, generation) for key, generation, previous, host in rows
            if (key, generation) in texts and (key, previous) in texts
            and _own_words(*texts[key, generation], templates.get(host, set()))
            == _own_words(*texts[key, previous], templates.get(host, set()))]
    if same:
        keys, generations = zip(*same)
        table = pa.table({"natural_key": pa.array(keys, pa.string()),
                          "generation": pa.array(generations, pa.int64())})
        with _registered(connection, "same_words", table):
            connection.execute("""
                UPDATE fresh_flags SET template_only = TRUE, template_edit = edit
                FROM same_words w
                WHERE fresh_flags.natural_key = w.natural_key AND fresh_flags.generation = w.generation""")


# The rows `_measure_own` measures again: a row counted again that changed its host's
# template and is not template-only (so the page's own blocks changed too, or moved), and a
# row measured so before that no longer is one (a digest left the template), measured again
# whole.
OWN_MEASURE_ROWS = """
    SELECT f.natural_key, f.generation, s.previous_generation, p.host,
           f.template_changed AND f.template_only IS FALSE AS own
    FROM fresh_flags f JOIN stale_changes s USING (natural_key, generation)
    JOIN host_pages p USING (natural_key)
    WHERE (f.template_changed AND f.template_only IS FALSE) OR (f.recount AND s.measure = ?)
    ORDER BY 1, 2"""
_REMEASURED = f"""
    UPDATE changes SET {MEASURES_SET}
    FROM remeasured m
    WHERE changes.natural_key = m.natural_key AND changes.generation = m.generation
      AND changes.natural_key IN ({{keys}})"""


def _texts_and_lists(connection: duckdb.DuckDBPyConnection,
                     rows: Sequence[tuple]) -> dict[tuple[str, int], tuple[str, bytes, list[int]]]:
    """(text, digests, lengths) of both generations of each row (natural_key, generation,
    previous_generation, ...), where both its text and its chunk list are retained."""
    wanted: dict[str, set[int]] = {}
    for key, generation, previous, *_ in rows:
        wanted.setdefault(key, set()).update((generation, previous))
    lists = {(key, generation): (digests, lengths) for key, generation, digests, lengths
             in _by_key_pairs(connection, _CHECKED_LISTS, wanted)}
    return {(key, generation): (text, *lists[key, generation]) for key, generation, text
            in _by_key_pairs(connection, _CHECKED_TEXTS, wanted)
            if text is not None and (key, generation) in lists}


def _templates_of(connection: duckdb.DuckDBPyConnection, hosts: set[str]) -> dict[str, set[bytes]]:
    templates: dict[str, set[bytes]] = {}
    for host, digest in connection.execute(_CHECKED_TEMPLATES, [sorted(hosts)]).fetchall():
        templates.setdefault(host, set()).add(digest)
    return templates


def _own_part(text: str, digests: bytes, lengths: Sequence[int],
              template: set[bytes]) -> tuple[bytes, bytes, list[int]]:
    """A generation's text outside its host's template chunks, and those chunks' digests (end
    to end) and lengths, in order (`chunks_from_lengths` makes them chunks)."""
    data = text.encode("utf-8")
    parts, kept, kept_lengths, at = [], [], [], 0
    for index, length in enumerate(lengths):
        digest = digests[DIGEST_SIZE * index:DIGEST_SIZE * (index + 1)]
        if digest not in template:
            parts.append(data[at:at + length])
            kept.append(digest)
            kept_lengths.append(length)
        at += length
    return b"".join(parts), b"".join(kept), kept_lengths


def _measure_own(connection: duckdb.DuckDBPyConnection) -> None:
    """Measure again, with the exact edits of the page's own text (its host's template
    chunks left out of both texts), each change row of its host's template and of the
    page's own blocks (`OWN_MEASURE_ROWS`): its verdict, shares, bytes and excerpt then say
    what the page's own text did, as the lists rank and label it. A site-wide banner added beside a
    paragraph of the page's own read as that page's first edit and rewrite on a short page
    (the docs crawls: every one of their 75 own changes' excerpts began with the banner).
    Where either text is gone, the row keeps its measures."""
    rows = connection.execute(OWN_MEASURE_ROWS, [OWN_EDITS]).fetchall()
    if not rows:
        return
    texts = _texts_and_lists(connection, rows)
    templates = _templates_of(connection, {host for *_, host, own in rows if own})
    measured = []
    for key, generation, previous, host, own in rows:
        if (key, generation) not in texts or (key, previous) not in texts:
            continue
        template = templates.get(host, set()) if own else set()
        old_text, *old_list = _own_part(*texts[key, previous], template)
        new_text, *new_list = _own_part(*texts[key, generation], template)
        report = compare(chunks_from_lengths(*old_list), chunks_from_lengths(*new_list),
                         old_text=old_text, new_text=new_text)
        measured.append(Remeasured(key, generation, *report_measures(
            report, old_text, new_text, OWN_EDITS if own else EDITS)))
    if measured:
        with _registered(connection, "remeasured", arrow_table(Remeasured, measured)):
            _for_keys(connection, _REMEASURED, sorted({row.natural_key for row in measured}), "changes")


def unflagged_pages(connection: duckdb.DuckDBPyConnection, besides: Sequence[str] = ()) -> list[str]:
    """The pages, other than `besides`, with a change row that can be flagged and is not
    (`UNFLAGGED_PAGES`): the rows a killed run wrote, in a store whose runs all finished none."""
    connection.execute(f"CREATE OR REPLACE TEMP TABLE unflagged AS {UNFLAGGED_ROWS}")
    with _registered(connection, "besides", _key_table(besides)):
        connection.execute("DELETE FROM unflagged WHERE natural_key IN (SELECT natural_key FROM besides)")
    _gather(connection, "unflagged_lists", UNFLAGGED_LISTS, _keys_of(connection, "unflagged"), "chunk_lists")
    pages = [key for (key,) in connection.execute(UNFLAGGED_PAGES).fetchall()]
    connection.execute("DROP TABLE unflagged")
    connection.execute("DROP TABLE unflagged_lists")
    return pages


class Templates:
    """The stored templates and flags, mixed into `Store`: refreshed by the writers."""

    def refresh_templates(self, connection: duckdb.DuckDBPyConnection) -> None:
        """Every host's template counted again, and the flags set, through a write connection:
        after the chunk lists were rewritten (`cdc migrate`'s new digests)."""
        self._refresh_templates(connection, None)

    def _refresh_templates(self, connection: duckdb.DuckDBPyConnection, pages: Sequence[str] | None,
                           hosts: Sequence[str] = ()) -> None:
        """Count the templates of the hosts of `pages` and of `hosts` again, then set the
        flags of every change row of `pages` and of the rows a template change can flip.

        `pages` are the pages whose chunk lists changed (None: every page), `hosts` any other
        host whose pages changed (an erased page's). Only the rows of those hosts' pages are
        read, by key where the store is large next to them (`_gather`): a run's end costs as
        much in a store of a million pages as in one of the run's hosts alone."""
        if pages is None:
            hosts = [host for (host,) in connection.execute("SELECT DISTINCT host FROM pages").fetchall()]
        else:
            hosts = sorted({*hosts, *(host for (host,) in _for_keys(connection, (
                "SELECT DISTINCT host FROM pages WHERE natural_key IN ({keys})"), pages, "pages"))})
        connection.execute("CREATE OR REPLACE TEMP TABLE touched_hosts (host VARCHAR)")
        with _registered(connection, "hosts_given", pa.table({"host": pa.array(hosts, pa.string())})):
            connection.execute("INSERT INTO touched_hosts SELECT host FROM hosts_given")
        if pages is None or not hosts:
            connection.execute(f"CREATE OR REPLACE TEMP TABLE host_pages AS "
                               f"{HOSTS_PAGES.format(hosts='SELECT host FROM touched_hosts')}")
        else:  # the hosts as constants: DuckDB filters the column as it scans it
            connection.execute(f"CREATE OR REPLACE TEMP TABLE host_pages AS "
                               f"{HOSTS_PAGES.format(hosts=', '.join('?' * len(hosts)))}", hosts)
        host_keys = None if pages is None else _keys_of(connection, "host_pages")
        _gather(connection, "host_lists", HOSTS_LISTS, host_keys, "chunk_lists")
        (lists,) = connection.execute("SELECT count(*) FROM host_lists").fetchone()
        in_arrow = lists <= CUT_IN_ARROW
        if in_arrow:
            connection.register("host_digests", digest_rows(connection.execute(HOSTS_DIGESTS).fetchall()))
        else:
            connection.execute(HOSTS_DIGESTS_VIEW)
        connection.execute("""
            CREATE OR REPLACE TEMP TABLE host_size AS
            SELECT host, count(*) AS pages FROM host_pages GROUP BY host""")
        connection.execute(f"CREATE OR REPLACE TEMP TABLE fresh_templates AS {_GATHERED_TEMPLATE_DIGESTS}",
                           [BOILERPLATE_MIN_PAGES, BOILERPLATE_SHARE])
        # The digests that entered or left a template: only a row that changed one of them
        # can flip, among the rows of the pages that did not change.
        connection.execute("""
            CREATE OR REPLACE TEMP TABLE template_moves AS
            WITH stored AS (SELECT host, digest FROM host_templates
                            WHERE host IN (SELECT host FROM touched_hosts))
            (SELECT * FROM fresh_templates EXCEPT SELECT * FROM stored)
            UNION ALL (SELECT * FROM stored EXCEPT SELECT * FROM fresh_templates)""")
        connection.execute("DELETE FROM host_templates WHERE host IN (SELECT host FROM touched_hosts)")
        connection.execute("INSERT INTO host_templates SELECT * FROM fresh_templates")
        connection.execute("CREATE OR REPLACE TEMP TABLE moved_pages (natural_key VARCHAR)")
        (moves,) = connection.execute("SELECT count(*) FROM template_moves").fetchone()
        if moves:  # one more read of the hosts' chunks, only when a template changed
            connection.execute(f"INSERT INTO moved_pages {_MOVED_PAGES}")
        stale = None if pages is None else sorted({*pages, *_keys_of(connection, "moved_pages")})
        _gather(connection, "stale_changes", STALE_CHANGES, stale, "changes")
        connection.execute(f"CREATE OR REPLACE TEMP TABLE fresh_flags AS {FRESH_FLAGS}")
        _settle_line_ends(connection)
        # Only the rows whose flag or edit the refresh changes are written.
        connection.execute("""
            CREATE OR REPLACE TEMP TABLE new_flags AS
            SELECT f.* FROM fresh_flags f JOIN stale_changes s USING (natural_key, generation)
            WHERE s.template_only IS DISTINCT FROM f.template_only
               OR s.template_edit IS DISTINCT FROM f.template_edit""")
        flagged = _keys_of(connection, "new_flags")
        _for_keys(connection, """
            UPDATE changes SET template_only = f.template_only, template_edit = f.template_edit
            FROM new_flags f
            WHERE changes.natural_key = f.natural_key AND changes.generation = f.generation
              AND changes.natural_key IN ({keys})""", flagged, "changes")
        _measure_own(connection)
        for table in ("touched_hosts", "host_pages", "host_lists", "host_size", "fresh_templates",
                      "template_moves", "moved_pages", "stale_changes", "fresh_flags", "new_flags"):
            connection.execute(f"DROP TABLE {table}")
        if in_arrow:
            connection.unregister("host_digests")
        else:
            connection.execute("DROP VIEW host_digests")
