//! Summaries of linked I/O calls: time per (client, serving host, operation)
//! ([`io_breakdown`]), per call type and serving host ([`io_call_types`]), transfer sizes
//! ([`io_sizes`]), and the code locations of the heaviest call groups ([`io_stacks`]).

use std::collections::{BTreeMap, HashMap, HashSet};

use super::{Endpoint, IoCall, IoLinks, IoOp};

/// Time one client's requests spent in one operation on one host.
#[derive(Clone, Debug, PartialEq)]
pub struct BreakdownRow {
    /// The client: `node/daemon` of the process that opened the request's connection, or `?`
    /// when no end of it was recorded as a client.
    pub client: String,
    /// The host where the calls ran.
    pub serving_host: String,
    /// The process there (`daemon`).
    pub serving_daemon: String,
    /// The operation.
    pub op: IoOp,
    /// Calls.
    pub calls: u64,
    /// Total time in them, nanoseconds.
    pub total_ns: u64,
    /// Requests with at least one such call.
    pub requests: u64,
}

/// Total I/O time per (client, serving host and process, operation), largest first: which
/// server handles which client's requests, and how long.
pub fn io_breakdown(calls: &[IoCall], links: &IoLinks) -> Vec<BreakdownRow> {
    type Key = (String, String, String, IoOp);
    let mut rows: BTreeMap<Key, (u64, u64, u64)> = BTreeMap::new();
    for request in &links.requests {
        let client = request.client.map(|c| calls[c].process_name()).unwrap_or_else(|| "?".into());
        let mut seen: HashMap<(&str, &str, IoOp), ()> = HashMap::new();
        for &i in &request.calls {
            let c = &calls[i];
            let Some(op) = c.record.op else { continue };
            let row = rows.entry((client.clone(), c.node.clone(), c.daemon.clone(), op)).or_default();
            row.0 += 1;
            row.1 += c.duration_ns();
            if seen.insert((c.node.as_str(), c.daemon.as_str(), op), ()).is_none() {
                row.2 += 1;
            }
        }
    }
    let mut out: Vec<BreakdownRow> = rows
        .into_iter()
        .map(|((client, serving_host, serving_daemon, op), (calls, total_ns, requests))| BreakdownRow {
            client,
            serving_host,
            serving_daemon,
            op,
            calls,
            total_ns,
            requests,
        })
        .collect();
    out.sort_by_key(|r| std::cmp::Reverse(r.total_ns));
    out
}

/// The endpoints connections are made to: the peers of `connect` calls and the local ends of
/// `accept` calls (a server's listening address).
pub fn services(calls: &[IoCall]) -> HashSet<Endpoint> {
    let mut out = HashSet::new();
    for c in calls {
        match c.record.op {
            Some(IoOp::Connect) => out.extend(c.record.remote.clone()),
            Some(IoOp::Accept) => out.extend(c.record.local.clone()),
            _ => {}
        }
    }
    out
}

/// What a call works on, as the views name it: its file; on a socket, its peer — or, on a
/// server's side of a connection (its local end a service, its peer not), `clients of` the
/// service, so that a server's calls group by service rather than by each client's port.
pub fn target_name(call: &IoCall, services: &HashSet<Endpoint>) -> Option<String> {
    let r = &call.record;
    if let Some(path) = &r.path {
        return Some(path.clone());
    }
    match (&r.local, &r.remote) {
        (Some(local), Some(remote)) if services.contains(local) && !services.contains(remote) => {
            Some(format!("clients of {local}"))
        }
        (_, Some(remote)) => Some(remote.to_string()),
        _ => None,
    }
}

/// A file or peer and the time calls on it took.
#[derive(Clone, Debug, PartialEq)]
pub struct Share {
    /// The file path, or the peer's `address:port`.
    pub name: String,
    /// Calls.
    pub calls: u64,
    /// Time, nanoseconds.
    pub total_ns: u64,
}

/// One call type on one host.
#[derive(Clone, Debug, PartialEq)]
pub struct CallTypeRow {
    /// The host.
    pub host: String,
    /// The operation.
    pub op: IoOp,
    /// Calls.
    pub calls: u64,
    /// Failed calls.
    pub failed: u64,
    /// Total time, nanoseconds.
    pub total_ns: u64,
    /// Bytes moved.
    pub bytes: u64,
    /// The files and peers that took the most time, at most three, largest first.
    pub top: Vec<Share>,
}

/// Count and total time per call type per host, with the files and peers that dominate;
/// largest total first.
pub fn io_call_types(calls: &[IoCall]) -> Vec<CallTypeRow> {
    type Acc = (u64, u64, u64, u64, HashMap<String, (u64, u64)>);
    let mut rows: BTreeMap<(String, IoOp), Acc> = BTreeMap::new();
    let services = services(calls);
    for c in calls {
        let Some(op) = c.record.op else { continue };
        let row = rows.entry((c.node.clone(), op)).or_default();
        row.0 += 1;
        row.1 += u64::from(!c.record.ok());
        row.2 += c.duration_ns();
        row.3 += c.record.bytes;
        if let Some(name) = target_name(c, &services) {
            let share = row.4.entry(name).or_default();
            share.0 += 1;
            share.1 += c.duration_ns();
        }
    }
    let mut out: Vec<CallTypeRow> = rows
        .into_iter()
        .map(|((host, op), (calls, failed, total_ns, bytes, shares))| {
            let mut top: Vec<Share> =
                shares.into_iter().map(|(name, (calls, total_ns))| Share { name, calls, total_ns }).collect();
            top.sort_by(|a, b| b.total_ns.cmp(&a.total_ns).then_with(|| a.name.cmp(&b.name)));
            top.truncate(3);
            CallTypeRow { host, op, calls, failed, total_ns, bytes, top }
        })
        .collect();
    out.sort_by(|a, b| b.total_ns.cmp(&a.total_ns).then_with(|| (&a.host, a.op).cmp(&(&b.host, b.op))));
    out
}

/// Transfer sizes of one operation between one process and one peer (or file).
#[derive(Clone, Debug, PartialEq)]
pub struct SizeRow {
    /// The operation.
    pub op: IoOp,
    /// `node/daemon` of the process that made the calls.
    pub process: String,
    /// The peer's `address:port`, or the file, or `-`.
    pub peer: String,
    /// Calls that moved data.
    pub calls: u64,
    /// Bytes moved.
    pub bytes: u64,
    /// Bytes the application asked for, over the calls that say.
    pub bytes_asked: u64,
    /// Calls per size class: `(upper bound in bytes, calls)` for the classes up to 1 B, 2 B,
    /// 4 B, … (powers of two), only classes with calls, smallest first.
    pub histogram: Vec<(u64, u64)>,
}

impl SizeRow {
    /// Bytes moved over bytes asked for (`None` when nothing was asked for): far above 1 when
    /// a lower layer moves more than the application reads, as read-ahead does.
    pub fn amplification(&self) -> Option<f64> {
        (self.bytes_asked > 0).then(|| self.bytes as f64 / self.bytes_asked as f64)
    }
}

/// A link between two processes and what crossed it: what the sender sent against what the
/// receiver's application asked for.
#[derive(Clone, Debug, PartialEq)]
pub struct FlowRow {
    /// `node/daemon` of the sender.
    pub sender: String,
    /// `node/daemon` of the receiver.
    pub receiver: String,
    /// Bytes the sender sent.
    pub bytes_sent: u64,
    /// Send calls.
    pub sends: u64,
    /// Bytes the receiver received.
    pub bytes_received: u64,
    /// Bytes the receiver's application asked for in those receives.
    pub bytes_asked: u64,
    /// Receive calls.
    pub receives: u64,
}

impl FlowRow {
    /// Bytes sent over bytes the receiving application asked for.
    pub fn amplification(&self) -> Option<f64> {
        (self.bytes_asked > 0).then(|| self.bytes_sent as f64 / self.bytes_asked as f64)
    }
}

/// Transfer sizes per (operation, process, peer), and per sender → receiver flow.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct IoSizes {
    /// By operation, process and peer; most bytes first.
    pub rows: Vec<SizeRow>,
    /// By sender and receiver (both ends recorded); most bytes first.
    pub flows: Vec<FlowRow>,
}

/// The size class of `bytes`: the smallest power of two at least `bytes` (1 for 0 and 1).
fn size_class(bytes: u64) -> u64 {
    bytes.max(1).checked_next_power_of_two().unwrap_or(u64::MAX)
}

/// Histograms of transfer sizes, and the ratio of bytes moved to bytes asked for.
pub fn io_sizes(calls: &[IoCall]) -> IoSizes {
    type Acc = (u64, u64, u64, BTreeMap<u64, u64>);
    let mut rows: BTreeMap<(IoOp, String, String), Acc> = BTreeMap::new();
    // Flows: the sender's sends, the receiver's receives, matched by the socket addresses.
    let mut sent: HashMap<(String, String), (String, u64, u64)> = HashMap::new();
    let mut received: HashMap<(String, String), (String, u64, u64, u64)> = HashMap::new();
    let services = services(calls);
    for c in calls {
        let Some(op) = c.record.op else { continue };
        if !op.moves_data() || !c.record.ok() {
            continue;
        }
        let peer = target_name(c, &services).unwrap_or_else(|| "-".into());
        let row = rows.entry((op, c.process_name(), peer)).or_default();
        row.0 += 1;
        row.1 += c.record.bytes;
        row.2 += c.record.bytes_asked.unwrap_or(0);
        *row.3.entry(size_class(c.record.bytes)).or_default() += 1;
        if let (Some(local), Some(remote)) = (&c.record.local, &c.record.remote) {
            if op.is_output() {
                let e =
                    sent.entry((local.to_string(), remote.to_string())).or_insert((c.process_name(), 0, 0));
                e.1 += c.record.bytes;
                e.2 += 1;
            } else {
                let e = received.entry((remote.to_string(), local.to_string())).or_insert((
                    c.process_name(),
                    0,
                    0,
                    0,
                ));
                e.1 += c.record.bytes;
                e.2 += c.record.bytes_asked.unwrap_or(0);
                e.3 += 1;
            }
        }
    }
    let mut out = IoSizes {
        rows: rows
            .into_iter()
            .map(|((op, process, peer), (calls, bytes, bytes_asked, hist))| SizeRow {
                op,
                process,
                peer,
                calls,
                bytes,
                bytes_asked,
                histogram: hist.into_iter().collect(),
            })
            .collect(),
        flows: Vec::new(),
    };
    let mut flows: BTreeMap<(String, String), FlowRow> = BTreeMap::new();
    for (key, (sender, bytes_sent, sends)) in sent {
        if let Some((receiver, bytes_received, bytes_asked, receives)) = received.get(&key) {
            let f = flows.entry((sender.clone(), receiver.clone())).or_insert_with(|| FlowRow {
                sender,
                receiver: receiver.clone(),
                bytes_sent: 0,
                sends: 0,
                bytes_received: 0,
                bytes_asked: 0,
                receives: 0,
            });
            f.bytes_sent += bytes_sent;
            f.sends += sends;
            f.bytes_received += bytes_received;
            f.bytes_asked += bytes_asked;
            f.receives += receives;
        }
    }
    out.flows = flows.into_values().collect();
    out.rows.sort_by(|a, b| {
        b.bytes.cmp(&a.bytes).then_with(|| (a.op, &a.process, &a.peer).cmp(&(b.op, &b.process, &b.peer)))
    });
    out.flows.sort_by(|a, b| b.bytes_sent.cmp(&a.bytes_sent).then_with(|| a.sender.cmp(&b.sender)));
    out
}

/// One code location of a call group: a `file:line`, or a stack.
#[derive(Clone, Debug, PartialEq)]
pub struct Location {
    /// The frames, innermost first (one frame, `file:line`, for calls recorded in Rust).
    pub frames: Vec<String>,
    /// Calls from here.
    pub calls: u64,
    /// Their time, nanoseconds.
    pub total_ns: u64,
}

/// The calls of one kind to one file or peer from one process, and where in the code they come
/// from.
#[derive(Clone, Debug, PartialEq)]
pub struct StackGroup {
    /// `node/daemon`.
    pub process: String,
    /// The operation.
    pub op: IoOp,
    /// The file or peer, or `-`.
    pub target: String,
    /// Calls.
    pub calls: u64,
    /// Total time, nanoseconds.
    pub total_ns: u64,
    /// The outermost frames every location shares (outermost first), when there are stacks.
    pub shared: Vec<String>,
    /// The distinct locations, most time first; each location's frames are innermost first.
    pub locations: Vec<Location>,
}

/// Which groups [`io_stacks`] shows.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum StackOrder {
    /// The groups with the most total time.
    Slowest,
    /// The groups with the most calls.
    MostFrequent,
}

/// For the `top` heaviest call groups (by time or by count), their distinct code locations,
/// the frames they all share and where they part.
pub fn io_stacks(calls: &[IoCall], order: StackOrder, top: usize) -> Vec<StackGroup> {
    type Acc = (u64, u64, HashMap<Vec<String>, (u64, u64)>);
    let mut groups: HashMap<(String, IoOp, String), Acc> = HashMap::new();
    let services = services(calls);
    for c in calls {
        let Some(op) = c.record.op else { continue };
        let target = target_name(c, &services).unwrap_or_else(|| "-".into());
        let frames = if !c.record.stack.is_empty() {
            c.record.stack.clone()
        } else if let Some(location) = &c.record.location {
            vec![location.clone()]
        } else {
            Vec::new()
        };
        let g = groups.entry((c.process_name(), op, target)).or_default();
        g.0 += 1;
        g.1 += c.duration_ns();
        let l = g.2.entry(frames).or_default();
        l.0 += 1;
        l.1 += c.duration_ns();
    }
    let mut out: Vec<StackGroup> = groups
        .into_iter()
        .map(|((process, op, target), (calls, total_ns, locations))| {
            let mut locations: Vec<Location> = locations
                .into_iter()
                .filter(|(frames, _)| !frames.is_empty())
                .map(|(frames, (calls, total_ns))| Location { frames, calls, total_ns })
                .collect();
            locations.sort_by(|a, b| b.total_ns.cmp(&a.total_ns).then_with(|| a.frames.cmp(&b.frames)));
            let shared = shared_outer_frames(&locations);
            StackGroup { process, op, target, calls, total_ns, shared, locations }
        })
        .collect();
    out.sort_by(|a, b| {
        let key = |g: &StackGroup| match order {
            StackOrder::Slowest => (g.total_ns, g.calls),
            StackOrder::MostFrequent => (g.calls, g.total_ns),
        };
        key(b).cmp(&key(a)).then_with(|| (&a.process, a.op, &a.target).cmp(&(&b.process, b.op, &b.target)))
    });
    out.truncate(top);
    out
}

/// The outermost frames all `locations` share, outermost first.
fn shared_outer_frames(locations: &[Location]) -> Vec<String> {
    let Some(first) = locations.first() else { return Vec::new() };
    let mut shared: Vec<&String> = first.frames.iter().rev().collect();
    for l in &locations[1..] {
        let common = shared.iter().zip(l.frames.iter().rev()).take_while(|(a, b)| **a == *b).count();
        shared.truncate(common);
    }
    shared.into_iter().cloned().collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::io::{link_requests, Endpoint, IoRecord, Transport};
    use ringtrace_core::TraceId;

    #[allow(clippy::too_many_arguments)]
    fn call(
        node: &str,
        op: IoOp,
        t: u64,
        dur: u64,
        bytes: u64,
        asked: Option<u64>,
        local: u16,
        remote: u16,
    ) -> IoCall {
        let ep = |port| Endpoint { address: "127.0.0.1".into(), port };
        IoCall {
            span: 0,
            process: 0,
            node: node.into(),
            daemon: "d".into(),
            trace_id: TraceId::new(1).unwrap(),
            in_span: false,
            record: IoRecord {
                pid: 1,
                tid: 1,
                op: Some(op),
                syscall: op.as_str().into(),
                fd: Some(3),
                start_unix_ns: t,
                end_unix_ns: t + dur,
                bytes,
                bytes_asked: asked,
                transport: Some(Transport::Tcp),
                local: Some(ep(local)),
                remote: Some(ep(remote)),
                ..IoRecord::default()
            },
        }
    }

    /// Read-ahead: the server sends 256 KiB while the client's application asks for 16 KiB.
    #[test]
    fn sizes_show_read_ahead_as_amplification() {
        let calls = vec![
            call("client", IoOp::Send, 0, 10, 100, Some(100), 5000, 80),
            call("server", IoOp::Recv, 20, 10, 100, Some(65536), 80, 5000),
            call("server", IoOp::Send, 40, 10, 262_144, Some(262_144), 80, 5000),
            call("client", IoOp::Recv, 60, 10, 16_384, Some(16_384), 5000, 80),
        ];
        let sizes = io_sizes(&calls);
        let flow = sizes.flows.iter().find(|f| f.sender == "server/d").unwrap();
        assert_eq!(flow.amplification(), Some(16.0));
        let send = sizes.rows.iter().find(|r| r.op == IoOp::Send && r.process == "server/d").unwrap();
        assert_eq!(send.histogram, vec![(262_144, 1)]);
        let links = link_requests(&calls);
        let rows = io_breakdown(&calls, &links);
        assert_eq!(rows.len(), 4);
        assert!(rows.iter().all(|r| r.client == "client/d" && r.requests == 1), "{rows:#?}");
        let types = io_call_types(&calls);
        assert_eq!(types.iter().map(|r| r.calls).sum::<u64>(), 4);
    }

    #[test]
    fn stacks_show_what_locations_share_and_where_they_part() {
        let mut a = call("h", IoOp::Read, 0, 10, 1, None, 1, 2);
        a.record.stack = vec!["read".into(), "helper_a".into(), "main".into()];
        let mut b = call("h", IoOp::Read, 0, 30, 1, None, 1, 2);
        b.record.stack = vec!["read".into(), "helper_b".into(), "main".into()];
        let groups = io_stacks(&[a.clone(), b, a], StackOrder::Slowest, 5);
        assert_eq!(groups.len(), 1);
        assert_eq!(groups[0].shared, vec!["main".to_string()]);
        assert_eq!(groups[0].locations.len(), 2);
        assert_eq!(groups[0].locations[0].frames[1], "helper_b");
    }
}
