"""DuckDB's nearest queries to ringtrace's views, on a Parquet store (issue #18).

    python benches/store_duckdb.py STORE

Run by `store_views.sh` and `store_views_large.sh` with the test virtualenv's Python (DuckDB
from `scripts/install-duckdb.sh`): each query's time inside one connection, median of 3.
"""
import duckdb, statistics, sys, time
con = duckdb.connect()
files = (sys.argv[1] + "/**/*.parquet").replace("'", "''")
con.execute(f"CREATE VIEW spans AS SELECT * FROM read_parquet('{files}', hive_partitioning = true, hive_types = {{'node': VARCHAR}})")
queries = {
    "profile by method, 1 s buckets": "SELECT CASE WHEN target <> '' THEN target || '::' || name ELSE daemon || ': ' || name END, start_unix_ns // 1000000000, count(*) FROM spans GROUP BY ALL",
    "profile by node, 1 s buckets": "SELECT node, start_unix_ns // 1000000000, count(*) FROM spans GROUP BY ALL",
    "stats without self time": "SELECT daemon, name, count(*), sum(duration_ns), min(duration_ns), max(duration_ns), quantile_disc(duration_ns, [0.5, 0.9, 0.99]) FROM spans GROUP BY ALL",
    "deps as a parent join": "SELECT p.daemon, c.daemon, count(*), sum(CASE WHEN c.status = 'error' THEN 1 ELSE 0 END) FROM spans c JOIN spans p ON c.trace_id = p.trace_id AND c.parent_span_id = p.span_id GROUP BY ALL",
}
print(f"\nDuckDB {duckdb.__version__}, query time (median of 3):")
for name, sql in queries.items():
    times = []
    for _ in range(3):
        start = time.perf_counter()
        con.execute(sql).fetchall()
        times.append(time.perf_counter() - start)
    print(f"- {name}: {statistics.median(times):.3f} s")
