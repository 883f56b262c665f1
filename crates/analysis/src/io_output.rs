//! Renderings of the I/O views ([`crate::io`]): JSON for tools (`ringtrace io … --json`), tables
//! for people.

use std::io::{self, Write};

use serde_json::{json, Map, Value};

use crate::io::views::{CallTypeRow, IoSizes, StackGroup};
use crate::io::{IoCall, IoLinks};
use crate::time_format::duration;

fn call_json(c: &IoCall) -> Value {
    let r = &c.record;
    let mut m = Map::new();
    m.insert("host".into(), json!(c.node));
    m.insert("daemon".into(), json!(c.daemon));
    m.insert("pid".into(), json!(r.pid));
    m.insert("tid".into(), json!(r.tid));
    m.insert("fd".into(), json!(r.fd));
    m.insert("op".into(), json!(r.op.map(|o| o.as_str())));
    m.insert("start_unix_ns".into(), json!(r.start_unix_ns));
    m.insert("end_unix_ns".into(), json!(r.end_unix_ns));
    m.insert("ok".into(), json!(r.ok()));
    m.insert("bytes".into(), json!(r.bytes));
    if let Some(local) = &r.local {
        m.insert("local".into(), json!(local.to_string()));
    }
    if let Some(remote) = &r.remote {
        m.insert("remote".into(), json!(remote.to_string()));
    }
    if let Some(path) = &r.path {
        m.insert("path".into(), json!(path));
    }
    if let Some(error) = &r.error {
        m.insert("error".into(), json!(error));
    }
    Value::Object(m)
}

/// Writes `{"requests":[{"request":"...","calls":[{"host","tid","fd","op","start_unix_ns",
/// "end_unix_ns","ok","bytes","local","remote"}]}],"unlinked_calls":N}` on one line: requests by
/// their first call, calls by start; `local`/`remote` only for socket calls. Each call also has
/// `daemon` and `pid`, and `path` and `error` when known.
pub fn write_requests_json(calls: &[IoCall], links: &IoLinks, out: &mut dyn Write) -> io::Result<()> {
    let requests: Vec<Value> = links
        .requests
        .iter()
        .map(|r| json!({"request": r.id, "calls": r.calls.iter().map(|&i| call_json(&calls[i])).collect::<Vec<_>>()}))
        .collect();
    let unlinked = links.request_of.iter().filter(|r| r.is_none()).count();
    serde_json::to_writer(&mut *out, &json!({"requests": requests, "unlinked_calls": unlinked}))?;
    writeln!(out)
}

/// The requests, one line each (the `top` with the most I/O time, then a count of the rest).
pub fn write_requests_table(
    calls: &[IoCall],
    links: &IoLinks,
    top: usize,
    out: &mut dyn Write,
) -> io::Result<()> {
    let unlinked = links.request_of.iter().filter(|r| r.is_none()).count();
    writeln!(
        out,
        "{} I/O calls, {} requests over {} connections ({} with both ends recorded); {} calls in no request",
        calls.len(),
        links.requests.len(),
        links.connections,
        links.connections_both_ends,
        unlinked
    )?;
    let mut order: Vec<(u64, usize)> = links
        .requests
        .iter()
        .enumerate()
        .map(|(n, r)| (r.calls.iter().map(|&i| calls[i].duration_ns()).sum(), n))
        .collect();
    order.sort_by(|a, b| b.0.cmp(&a.0).then(a.1.cmp(&b.1)));
    writeln!(out, "{:<34} {:<24} {:>6} {:>6} {:>12}", "request", "client", "calls", "hosts", "I/O time")?;
    for &(total, n) in order.iter().take(top) {
        let r = &links.requests[n];
        let client = r.client.map(|c| calls[c].process_name()).unwrap_or_else(|| "?".into());
        let mut hosts: Vec<&str> = r.calls.iter().map(|&i| calls[i].node.as_str()).collect();
        hosts.sort_unstable();
        hosts.dedup();
        writeln!(
            out,
            "{:<34} {:<24} {:>6} {:>6} {:>12}",
            r.id,
            client,
            r.calls.len(),
            hosts.len(),
            duration(total)
        )?;
    }
    if order.len() > top {
        writeln!(out, "… and {} more requests (--top N shows more, --json all)", order.len() - top)?;
    }
    Ok(())
}

/// Writes `{"rows":[{"client","serving_host","serving_daemon","op","calls","requests",
/// "total_ns"}]}`, most time first.
pub fn write_breakdown_json(rows: &[crate::io::views::BreakdownRow], out: &mut dyn Write) -> io::Result<()> {
    let rows: Vec<Value> = rows
        .iter()
        .map(|r| {
            json!({"client": r.client, "serving_host": r.serving_host, "serving_daemon": r.serving_daemon,
                   "op": r.op.as_str(), "calls": r.calls, "requests": r.requests, "total_ns": r.total_ns})
        })
        .collect();
    serde_json::to_writer(&mut *out, &json!({ "rows": rows }))?;
    writeln!(out)
}

/// The breakdown as a table, most time first.
pub fn write_breakdown_table(rows: &[crate::io::views::BreakdownRow], out: &mut dyn Write) -> io::Result<()> {
    writeln!(
        out,
        "{:<28} {:<28} {:<8} {:>8} {:>8} {:>12}",
        "client", "serving host/daemon", "op", "calls", "requests", "total"
    )?;
    for r in rows {
        writeln!(
            out,
            "{:<28} {:<28} {:<8} {:>8} {:>8} {:>12}",
            r.client,
            format!("{}/{}", r.serving_host, r.serving_daemon),
            r.op.as_str(),
            r.calls,
            r.requests,
            duration(r.total_ns)
        )?;
    }
    Ok(())
}

/// Writes `{"rows":[{"host","op","calls","failed","total_ns","bytes","top":[{"name","calls",
/// "total_ns"}]}]}`, most time first.
pub fn write_call_types_json(rows: &[CallTypeRow], out: &mut dyn Write) -> io::Result<()> {
    let rows: Vec<Value> = rows
        .iter()
        .map(|r| {
            json!({"host": r.host, "op": r.op.as_str(), "calls": r.calls, "failed": r.failed,
                   "total_ns": r.total_ns, "bytes": r.bytes,
                   "top": r.top.iter().map(|s| json!({"name": s.name, "calls": s.calls, "total_ns": s.total_ns})).collect::<Vec<_>>()})
        })
        .collect();
    serde_json::to_writer(&mut *out, &json!({ "rows": rows }))?;
    writeln!(out)
}

/// The call types as a table, with the file or peer that took the most time.
pub fn write_call_types_table(rows: &[CallTypeRow], out: &mut dyn Write) -> io::Result<()> {
    writeln!(
        out,
        "{:<20} {:<8} {:>8} {:>7} {:>12} {:>12}  top file or peer",
        "host", "op", "calls", "failed", "total", "bytes"
    )?;
    for r in rows {
        let top = r.top.first().map(|s| format!("{} ({})", s.name, duration(s.total_ns))).unwrap_or_default();
        writeln!(
            out,
            "{:<20} {:<8} {:>8} {:>7} {:>12} {:>12}  {}",
            r.host,
            r.op.as_str(),
            r.calls,
            r.failed,
            duration(r.total_ns),
            r.bytes,
            top
        )?;
    }
    Ok(())
}

/// Writes `{"rows":[{"op","process","peer","calls","bytes","bytes_asked","amplification",
/// "histogram":[{"le","calls"}]}],"flows":[{"sender","receiver","bytes_sent","sends",
/// "bytes_received","bytes_asked","receives","amplification"}]}`; `amplification` is bytes moved
/// (sent) over bytes asked for, `null` when nothing was asked for.
pub fn write_sizes_json(sizes: &IoSizes, out: &mut dyn Write) -> io::Result<()> {
    let rows: Vec<Value> = sizes
        .rows
        .iter()
        .map(|r| {
            json!({"op": r.op.as_str(), "process": r.process, "peer": r.peer, "calls": r.calls, "bytes": r.bytes,
                   "bytes_asked": r.bytes_asked, "amplification": r.amplification(),
                   "histogram": r.histogram.iter().map(|&(le, n)| json!({"le": le, "calls": n})).collect::<Vec<_>>()})
        })
        .collect();
    let flows: Vec<Value> = sizes
        .flows
        .iter()
        .map(|f| {
            json!({"sender": f.sender, "receiver": f.receiver, "bytes_sent": f.bytes_sent, "sends": f.sends,
                   "bytes_received": f.bytes_received, "bytes_asked": f.bytes_asked, "receives": f.receives,
                   "amplification": f.amplification()})
        })
        .collect();
    serde_json::to_writer(&mut *out, &json!({"rows": rows, "flows": flows}))?;
    writeln!(out)
}

/// A byte count as `512 B`, `16 KiB`, `2 MiB`.
fn bytes(n: u64) -> String {
    const UNITS: [&str; 5] = ["B", "KiB", "MiB", "GiB", "TiB"];
    let mut v = n as f64;
    let mut unit = 0;
    while v >= 1024.0 && unit < UNITS.len() - 1 {
        v /= 1024.0;
        unit += 1;
    }
    if unit == 0 || v.fract() == 0.0 {
        format!("{v:.0} {}", UNITS[unit])
    } else {
        format!("{v:.1} {}", UNITS[unit])
    }
}

/// The sizes as tables: flows first (sender → receiver, what was sent against what was asked
/// for), then each (operation, process, peer) with its size classes.
pub fn write_sizes_table(sizes: &IoSizes, out: &mut dyn Write) -> io::Result<()> {
    if !sizes.flows.is_empty() {
        writeln!(
            out,
            "{:<26} {:<26} {:>12} {:>12} {:>8}",
            "sender", "receiver", "sent", "asked for", "ratio"
        )?;
        for f in &sizes.flows {
            let ratio = f.amplification().map(|a| format!("{a:.1}×")).unwrap_or_else(|| "-".into());
            writeln!(
                out,
                "{:<26} {:<26} {:>12} {:>12} {:>8}",
                f.sender,
                f.receiver,
                bytes(f.bytes_sent),
                bytes(f.bytes_asked),
                ratio
            )?;
        }
        writeln!(out)?;
    }
    writeln!(
        out,
        "{:<7} {:<26} {:<24} {:>7} {:>10} {:>10} {:>7}  sizes (calls up to)",
        "op", "process", "peer or file", "calls", "moved", "asked", "ratio"
    )?;
    for r in &sizes.rows {
        let ratio = r.amplification().map(|a| format!("{a:.1}×")).unwrap_or_else(|| "-".into());
        let hist: Vec<String> = r.histogram.iter().map(|&(le, n)| format!("{}:{n}", bytes(le))).collect();
        writeln!(
            out,
            "{:<7} {:<26} {:<24} {:>7} {:>10} {:>10} {:>7}  {}",
            r.op.as_str(),
            r.process,
            r.peer,
            r.calls,
            bytes(r.bytes),
            bytes(r.bytes_asked),
            ratio,
            hist.join(" ")
        )?;
    }
    Ok(())
}

/// Writes `{"groups":[{"process","op","target","calls","total_ns","shared":[frames outermost
/// first],"locations":[{"frames":[innermost first],"calls","total_ns"}]}]}`.
pub fn write_stacks_json(groups: &[StackGroup], out: &mut dyn Write) -> io::Result<()> {
    let groups: Vec<Value> = groups
        .iter()
        .map(|g| {
            json!({"process": g.process, "op": g.op.as_str(), "target": g.target, "calls": g.calls,
                   "total_ns": g.total_ns, "shared": g.shared,
                   "locations": g.locations.iter().map(|l| json!({"frames": l.frames, "calls": l.calls, "total_ns": l.total_ns})).collect::<Vec<_>>()})
        })
        .collect();
    serde_json::to_writer(&mut *out, &json!({ "groups": groups }))?;
    writeln!(out)
}

/// Each group, its shared outer frames, then each location from where it parts from them.
pub fn write_stacks_table(groups: &[StackGroup], out: &mut dyn Write) -> io::Result<()> {
    for g in groups {
        writeln!(
            out,
            "{} {} {}: {} calls, {}",
            g.process,
            g.op.as_str(),
            g.target,
            g.calls,
            duration(g.total_ns)
        )?;
        if g.locations.is_empty() {
            writeln!(out, "  (no code locations recorded)")?;
            continue;
        }
        if !g.shared.is_empty() && g.locations.len() > 1 {
            writeln!(out, "  shared by all {} locations (outermost first):", g.locations.len())?;
            for f in &g.shared {
                writeln!(out, "    {f}")?;
            }
        }
        for l in &g.locations {
            writeln!(out, "  {} calls, {}:", l.calls, duration(l.total_ns))?;
            let own = if g.locations.len() > 1 { l.frames.len() - g.shared.len() } else { l.frames.len() };
            for f in &l.frames[..own] {
                writeln!(out, "    {f}")?;
            }
            if own < l.frames.len() {
                writeln!(out, "    … then the shared frames")?;
            }
        }
    }
    Ok(())
}
