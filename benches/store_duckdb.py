"""DuckDB's nearest queries to ringtrace's views, on a Parquet store (issue #18).

    python benches/store_duckdb.py STORE

Run by `store_views.sh` and `store_views_large.sh` with the test virtualenv's Python (DuckDB
from `scripts/install-duckdb.sh`): each query's time inside one connection, median of 3.
"""
import duckdb, statistics, sys, time
con = duckdb.connect()
files = (sys.argv[1] + "/**/*.parquet").replace("'", "''")
con.execute(f"CREATE VIEW spans AS SELECT * FROM read_parquet('{files}', hive_partitioning = true, hive_types = {{'node': VARCHAR}})")
SELF_TIME = """
WITH clipped AS (
    SELECT p.trace_id, p.span_id AS parent,
           greatest(c.start_unix_ns, p.start_unix_ns) AS cs, least(c.end_unix_ns, p.end_unix_ns) AS ce
    FROM spans c JOIN spans p ON c.trace_id = p.trace_id AND c.parent_span_id = p.span_id
    WHERE least(c.end_unix_ns, p.end_unix_ns) > greatest(c.start_unix_ns, p.start_unix_ns)),
ordered AS (
    SELECT trace_id, parent, cs, ce,
           max(ce) OVER (PARTITION BY trace_id, parent ORDER BY cs, ce
                         ROWS BETWEEN UNBOUNDED PRECEDING AND 1 PRECEDING) AS before
    FROM clipped),
covered AS (
    SELECT trace_id, parent, sum(greatest(0, ce - greatest(cs, coalesce(before, cs)))) AS covered
    FROM ordered GROUP BY ALL)
SELECT s.daemon, s.name, count(*), sum(s.duration_ns), min(s.duration_ns), max(s.duration_ns),
       sum(s.duration_ns - coalesce(covered, 0)) AS self_total,
       min(s.duration_ns - coalesce(covered, 0)), max(s.duration_ns - coalesce(covered, 0)),
       quantile_disc(s.duration_ns, [0.5, 0.9, 0.99])
FROM spans s LEFT JOIN covered c ON c.trace_id = s.trace_id AND c.parent = s.span_id
GROUP BY ALL
"""
# `deps`' whole answer: both graphs (daemons and nodes), with error counts, and the calls to
# peers nobody recorded that the callers' attributes name (a span naming its peer with no child
# in another daemon). Left out: `connect` I/O calls to sockets no recorded process owns, which
# take each trace's I/O records in order.
DEPS = """
WITH calls AS (
    SELECT p.trace_id, p.span_id AS parent_id, p.daemon AS pd, p.node AS pn, c.daemon AS cd,
           c.node AS cn, c.status = 'error' AS err
    FROM spans c JOIN spans p ON c.trace_id = p.trace_id AND c.parent_span_id = p.span_id),
recorded AS (SELECT DISTINCT trace_id, parent_id FROM calls WHERE pd <> cd),
named AS (
    SELECT trace_id, span_id, daemon, node, status = 'error' AS err,
           coalesce(nullif(attributes['peer.service'], ''), nullif(attributes['db.system'], ''),
                    nullif(attributes['server.address'], '')) AS peer,
           attributes['server.address'] AS host
    FROM spans),
untraced AS (
    SELECT n.* FROM named n ANTI JOIN recorded r ON r.trace_id = n.trace_id AND r.parent_id = n.span_id
    WHERE n.peer IS NOT NULL)
SELECT 'services', pd, cd, false, count(*), count(*) FILTER (err) FROM calls GROUP BY ALL
UNION ALL SELECT 'nodes', pn, cn, false, count(*), count(*) FILTER (err) FROM calls GROUP BY ALL
UNION ALL SELECT 'services', daemon, peer, true, count(*), count(*) FILTER (err) FROM untraced GROUP BY ALL
UNION ALL SELECT 'nodes', node, coalesce(host, peer), true, count(*), count(*) FILTER (err) FROM untraced GROUP BY ALL
"""
queries = {
    "profile by method, 1 s buckets": "SELECT CASE WHEN target <> '' THEN target || '::' || name ELSE daemon || ': ' || name END, start_unix_ns // 1000000000, count(*) FROM spans GROUP BY ALL",
    "profile by node, 1 s buckets": "SELECT node, start_unix_ns // 1000000000, count(*) FROM spans GROUP BY ALL",
    "stats without self time": "SELECT daemon, name, count(*), sum(duration_ns), min(duration_ns), max(duration_ns), quantile_disc(duration_ns, [0.5, 0.9, 0.99]) FROM spans GROUP BY ALL",
    # Jaeger's self time, as `ringtrace stats` computes it: a span's duration minus the union of
    # its children's intervals clipped to it (each child's part past the ones before it, in
    # order of start).
    "stats with self time": SELF_TIME,
    "deps as a parent join": "SELECT p.daemon, c.daemon, count(*), sum(CASE WHEN c.status = 'error' THEN 1 ELSE 0 END) FROM spans c JOIN spans p ON c.trace_id = p.trace_id AND c.parent_span_id = p.span_id GROUP BY ALL",
    "deps, both graphs and named peers": DEPS,
}
print(f"\nDuckDB {duckdb.__version__}, query time (median of 3):")
for name, sql in queries.items():
    times = []
    for _ in range(3):
        start = time.perf_counter()
        con.execute(sql).fetchall()
        times.append(time.perf_counter() - start)
    print(f"- {name}: {statistics.median(times):.3f} s")
