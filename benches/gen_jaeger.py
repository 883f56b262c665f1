#!/usr/bin/env python3
"""Writes a Jaeger `/api/traces` document of TRACES traces of 10 spans each (two tags and a log a
span, three processes a trace), for reading benchmarks: python3 benches/gen_jaeger.py OUT [TRACES]
(default 20,000 traces: 106 MB)."""
import json
import sys

out, count = sys.argv[1], int(sys.argv[2]) if len(sys.argv) > 2 else 20000
traces = []
for t in range(count):
    tid = "%032x" % (t + 1)
    spans = []
    for s in range(10):
        spans.append({
            "traceID": tid, "spanID": "%016x" % (t * 16 + s + 1), "operationName": "op%d" % (s % 5),
            "references": [] if s == 0 else [{"refType": "CHILD_OF", "traceID": tid, "spanID": "%016x" % (t * 16 + 1)}],
            "startTime": 1700000000000000 + t * 1000 + s, "duration": 100 + s,
            "tags": [{"key": "http.method", "type": "string", "value": "GET"}, {"key": "n", "type": "int64", "value": s}],
            "logs": [{"timestamp": 1700000000000000 + t * 1000 + s, "fields": [{"key": "event", "type": "string", "value": "x"}]}],
            "processID": "p%d" % (s % 3),
        })
    processes = {"p%d" % i: {"serviceName": "svc%d" % i, "tags": [{"key": "hostname", "type": "string", "value": "h%d" % i}]} for i in range(3)}
    traces.append({"traceID": tid, "spans": spans, "processes": processes})
with open(out, "w") as f:
    json.dump({"data": traces}, f)
