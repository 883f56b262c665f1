//! `ringtrace io` on real programs nobody here wrote: Python's `http.server` (its
//! `ThreadingHTTPServer` and `SimpleHTTPRequestHandler`, a thread per request) serving files to
//! 8 concurrent `curl` processes, 504 requests in all, each side traced by `strace -f -ttt -T -yy`
//! into a log of its own, imported as hosts `server` and `client`, and linked.
//!
//! The ground truth comes from the request payloads, read from the raw logs by this test's own
//! scan, not by the importer: request N fetches `/req-N.txt`, whose content starts `req-N`. A call
//! whose line names `req-N` (a request line, any chunk of a body, the file's path) belongs to
//! request N; so does every call on a connection that carried `req-N`. Needs strace, curl and python3
//! (`scripts/install-io-tools.sh`).

use std::collections::{BTreeMap, HashMap};
use std::io::{BufRead, BufReader};
use std::path::Path;
use std::process::{Command, Stdio};

use crate::support::{json, ok, temp_dir};

const CLIENTS: usize = 8;
const PER_CLIENT: usize = 63;

/// The `http.server` classes, serving `argv[1]` for exactly `argv[2]` requests, then exiting;
/// prints its port first.
const SERVER: &str = "import functools, http.server as h, sys
s = h.ThreadingHTTPServer(('127.0.0.1', 0), functools.partial(h.SimpleHTTPRequestHandler, directory=sys.argv[1]))
print(s.server_address[1], flush=True)
for _ in range(int(sys.argv[2])):
    s.handle_request()
s.server_close()
";

/// `secs.micros` as nanoseconds, as `strace -ttt` prints it.
fn nanos(ts: &str) -> Option<u64> {
    let (s, us) = ts.split_once('.')?;
    Some(s.parse::<u64>().ok()? * 1_000_000_000 + format!("{us:0<9}").get(..9)?.parse::<u64>().ok()?)
}

/// The request number a line names (`req-N`), if any.
fn request_named(line: &str) -> Option<u64> {
    let at = line.find("req-")? + 4;
    let digits: String = line[at..].chars().take_while(char::is_ascii_digit).collect();
    digits.parse().ok()
}

/// The connection (both addresses, ordered) of the first connected `TCP:[a->b]` descriptor of
/// a line (an `accept4`'s listener, `TCP:[addr]`, is not one; its result is), if any.
fn connection(line: &str) -> Option<(String, String)> {
    line.match_indices("TCP:[").find_map(|(at, _)| {
        let at = at + 5;
        let end = at + line[at..].find(']')?;
        let (a, b) = line[at..end].split_once("->")?;
        Some(if a <= b { (a.to_owned(), b.to_owned()) } else { (b.to_owned(), a.to_owned()) })
    })
}

/// The system calls that are I/O (`docs/io-records.md`).
const IO_CALLS: &[&str] = &[
    "open",
    "openat",
    "openat2",
    "creat",
    "read",
    "readv",
    "write",
    "writev",
    "pread64",
    "preadv",
    "preadv2",
    "pwrite64",
    "pwritev",
    "pwritev2",
    "send",
    "sendto",
    "sendmsg",
    "sendmmsg",
    "sendfile",
    "recv",
    "recvfrom",
    "recvmsg",
    "recvmmsg",
    "connect",
    "accept",
    "accept4",
    "fsync",
    "fdatasync",
    "close",
];

/// One I/O call of a raw log: thread, start, and its whole text (an unfinished call joined with
/// its resumption).
fn raw_calls(log: &Path) -> Vec<(u64, u64, String)> {
    let mut calls = Vec::new();
    let mut pending: HashMap<u64, (u64, String)> = HashMap::new();
    for line in BufReader::new(std::fs::File::open(log).unwrap()).lines() {
        let line = line.unwrap();
        // strace pads a short pid with spaces (`605   1795685204.004817 …`).
        let mut parts = line.split_ascii_whitespace();
        let (Some(tid), Some(ts)) = (parts.next(), parts.next()) else { continue };
        let (Ok(tid), Some(start)) = (tid.parse::<u64>(), nanos(ts)) else { continue };
        let rest = line[line.find(ts).unwrap_or(0) + ts.len()..].trim_start();
        if rest.starts_with("<...") {
            if let Some((start, head)) = pending.remove(&tid) {
                calls.push((tid, start, format!("{head}{rest}")));
            }
        } else if rest.ends_with("<unfinished ...>") {
            pending.insert(tid, (start, rest.to_owned()));
        } else {
            calls.push((tid, start, rest.to_owned()));
        }
    }
    calls.retain(|(_, _, text)| IO_CALLS.contains(&text.split('(').next().unwrap_or_default()));
    calls
}

/// `(host, tid, start) -> request` for every call of the log whose request its payload, path or
/// connection tells; connections seen with two requests (a port reused) tell nothing.
fn ground_truth(
    host: &str,
    log: &Path,
    conns: &mut HashMap<(String, String), Option<u64>>,
    out: &mut HashMap<(String, u64, u64), u64>,
) {
    let calls = raw_calls(log);
    for (_, _, text) in &calls {
        if let (Some(c), Some(n)) = (connection(text), request_named(text)) {
            let e = conns.entry(c).or_insert(Some(n));
            if *e != Some(n) {
                *e = None;
            }
        }
    }
    for (tid, start, text) in calls {
        let n =
            request_named(&text).or_else(|| connection(&text).and_then(|c| conns.get(&c).copied().flatten()));
        if let Some(n) = n {
            out.insert((host.to_owned(), tid, start), n);
        }
    }
}

#[test]
fn a_real_server_and_its_clients_calls_land_in_their_requests() {
    let dir = temp_dir("io-strace");
    let www = dir.join("www");
    std::fs::create_dir_all(&www).unwrap();
    let total = CLIENTS * PER_CLIENT;
    for n in 0..total {
        // Sizes from a few bytes to ~24 KiB: some bodies take several reads and sends. The
        // request's name all along, so that every chunk names it (strace shows each call's first
        // 96 bytes).
        let body = format!("req-{n} ").repeat(1 + (n * 997) % 24_000 / 8);
        std::fs::write(www.join(format!("req-{n}.txt")), body).unwrap();
    }
    let (server_log, client_log) = (dir.join("server.log"), dir.join("client.log"));
    let strace = ["-f", "-ttt", "-T", "-yy", "-s", "96", "-o"];
    let mut server = Command::new("strace")
        .args(strace)
        .arg(&server_log)
        .args(["python3", "-c", SERVER])
        .arg(&www)
        .arg(total.to_string())
        .stdout(Stdio::piped())
        .stderr(Stdio::inherit())
        .spawn()
        .expect("run strace (scripts/install-io-tools.sh installs it)");
    let mut port = String::new();
    BufReader::new(server.stdout.take().unwrap()).read_line(&mut port).unwrap();
    let port = port.trim().to_owned();
    assert!(port.parse::<u16>().is_ok(), "the server printed no port: {port:?}");
    // 8 clients at once, each fetching its 63 files one after the other.
    let script: String = (0..CLIENTS)
        .map(|c| {
            let urls: Vec<String> = (0..PER_CLIENT)
                .map(|k| format!("http://127.0.0.1:{port}/req-{}.txt", c * PER_CLIENT + k))
                .collect();
            format!("curl -sSf {} > /dev/null &\n", urls.join(" "))
        })
        .collect::<String>()
        + "wait\n";
    let clients =
        Command::new("strace").args(strace).arg(&client_log).args(["sh", "-c", &script]).status().unwrap();
    assert!(clients.success(), "a client failed");
    let served = server.wait().unwrap();
    assert!(served.success(), "the server failed");

    let (server_rec, client_rec) = (dir.join("server.otlp"), dir.join("client.otlp"));
    let s = |p: &Path| p.to_str().unwrap().to_owned();
    let said = ok(&["io", "import", "--host", "server", &s(&server_log), "-o", &s(&server_rec)]);
    assert!(said.contains(" 0 malformed lines"), "{said}");
    let said = ok(&["io", "import", "--host", "client", &s(&client_log), "-o", &s(&client_rec)]);
    assert!(said.contains(" 0 malformed lines"), "{said}");
    let doc = json(&["io", "requests", "--json", &s(&server_rec), &s(&client_rec)]);

    let mut truth = HashMap::new();
    let mut conns = HashMap::new();
    ground_truth("server", &server_log, &mut conns, &mut truth);
    ground_truth("client", &client_log, &mut conns, &mut truth);
    // Each call the truth knows, with the request ringtrace put it in (None: in none).
    let mut placed: Vec<(u64, Option<usize>)> = Vec::new();
    let mut seen = 0usize;
    // The calls linked that no payload, path or connection names, by host, op and file: what
    // the verdict below leaves out.
    let mut unnamed: BTreeMap<String, usize> = BTreeMap::new();
    for (r, request) in doc["requests"].as_array().unwrap().iter().enumerate() {
        for call in request["calls"].as_array().unwrap() {
            seen += 1;
            let key = (
                call["host"].as_str().unwrap().to_owned(),
                call["tid"].as_u64().unwrap(),
                call["start_unix_ns"].as_u64().unwrap(),
            );
            match truth.get(&key) {
                Some(&n) => placed.push((n, Some(r))),
                None => {
                    let what =
                        format!("{} {} {}", call["host"], call["op"], call["path"].as_str().unwrap_or("-"));
                    *unnamed.entry(what).or_default() += 1;
                }
            }
        }
    }
    eprintln!("linked calls no payload names: {unnamed:?}");
    let linked: std::collections::HashSet<(String, u64, u64)> = doc["requests"]
        .as_array()
        .unwrap()
        .iter()
        .flat_map(|r| r["calls"].as_array().unwrap().iter())
        .map(|c| {
            (
                c["host"].as_str().unwrap().to_owned(),
                c["tid"].as_u64().unwrap(),
                c["start_unix_ns"].as_u64().unwrap(),
            )
        })
        .collect();
    for (key, &n) in &truth {
        if !linked.contains(key) {
            placed.push((n, None));
        }
    }
    // Request N's request: the one holding most of its calls; a call is right when it is there
    // and that request holds no more calls of another.
    let mut votes: BTreeMap<u64, HashMap<usize, usize>> = BTreeMap::new();
    let mut members: HashMap<usize, HashMap<u64, usize>> = HashMap::new();
    for &(n, r) in &placed {
        if let Some(r) = r {
            *votes.entry(n).or_default().entry(r).or_default() += 1;
            *members.entry(r).or_default().entry(n).or_default() += 1;
        }
    }
    let home: HashMap<u64, usize> = votes
        .iter()
        .map(|(&n, v)| (n, *v.iter().max_by_key(|&(r, c)| (c, std::cmp::Reverse(*r))).unwrap().0))
        .collect();
    let owner =
        |r: usize| members[&r].iter().max_by_key(|&(n, c)| (c, std::cmp::Reverse(*n))).map(|(&n, _)| n);
    let right = placed
        .iter()
        .filter(|&&(n, r)| r.is_some() && home.get(&n) == r.as_ref() && owner(r.unwrap()) == Some(n))
        .count();
    let share = right as f64 / placed.len() as f64;
    let requests_known = votes.len();
    eprintln!(
        "{} calls in {} requests; the payloads name the request of {} calls of {} requests; {right} right ({:.2}%)",
        seen,
        doc["requests"].as_array().unwrap().len(),
        placed.len(),
        requests_known,
        100.0 * share
    );
    assert_eq!(requests_known, total, "every request's calls are in the logs");
    assert!(placed.len() > 6 * total, "too few calls known: {}", placed.len());
    assert!(share >= 0.99, "{right} of {} calls in their request ({:.2}%)", placed.len(), 100.0 * share);
    // The server's time goes to the curl clients' requests, and the clients are curl.
    let breakdown = json(&["io", "breakdown", "--json", &s(&server_rec), &s(&client_rec)]);
    let rows = breakdown["rows"].as_array().unwrap();
    let served = |op: &str| {
        rows.iter().find(|r| r["client"] == "client/curl" && r["serving_host"] == "server" && r["op"] == op)
    };
    for op in ["accept", "recv", "send", "open", "read"] {
        let row = served(op).unwrap_or_else(|| panic!("no {op} row in {breakdown}"));
        assert!(row["requests"].as_u64().unwrap() > (total as u64) * 9 / 10, "{row}");
    }
    let _ = std::fs::remove_dir_all(&dir);
}

/// What `io import` says of a log with system calls it does not know and a last line cut short.
#[test]
fn unknown_calls_and_a_cut_log_import_with_counts() {
    let dir = temp_dir("io-strace-cut");
    std::fs::create_dir_all(&dir).unwrap();
    let log = dir.join("cut.log");
    std::fs::write(
        &log,
        "100 1700000000.000001 openat(AT_FDCWD</>, \"/etc/hostname\", O_RDONLY) = 3</etc/hostname> <0.000010>\n\
         100 1700000000.000020 frobnicate(3</etc/hostname>, 7) = 0 <0.000001>\n\
         this is not strace output\n\
         100 1700000000.000030 read(3</etc/hostname>, \"box\\n\", 4096) = 4 <0.000005>\n\
         100 1700000000.000040 read(3</etc/hostn",
    )
    .unwrap();
    let out = dir.join("cut.otlp");
    let o = crate::support::ringtrace(&[
        "io",
        "import",
        "--host",
        "h",
        log.to_str().unwrap(),
        "-o",
        out.to_str().unwrap(),
    ]);
    assert!(o.status.success(), "{}", crate::support::text(&o.stderr));
    let said = crate::support::text(&o.stdout);
    let problems = crate::support::text(&o.stderr);
    assert!(problems.contains("line 3: "), "the malformed line, by its number: {problems}");
    assert!(said.contains("2 I/O calls"), "{said}");
    assert!(said.contains("1 other system calls ignored"), "{said}");
    assert!(said.contains("1 malformed lines"), "{said}");
    assert!(said.contains("cut short"), "{said}");
    let doc = json(&["io", "calls", "--json", out.to_str().unwrap()]);
    let ops: Vec<&str> = doc["rows"].as_array().unwrap().iter().map(|r| r["op"].as_str().unwrap()).collect();
    assert!(ops.contains(&"open") && ops.contains(&"read"), "{doc}");
    let _ = std::fs::remove_dir_all(&dir);
}

/// `io stacks` on a client traced with `strace -k` (the analysis crate's fixture: `curl`
/// fetching three files): its sends share their outer frames and part inside libcurl.
#[test]
fn stacks_of_an_strace_k_log() {
    let dir = temp_dir("io-strace-stacks");
    std::fs::create_dir_all(&dir).unwrap();
    let log = concat!(env!("CARGO_MANIFEST_DIR"), "/../analysis/tests/data/strace/http_client.log");
    let rec = dir.join("client.otlp");
    ok(&["io", "import", "--host", "client", log, "-o", rec.to_str().unwrap()]);
    let doc = json(&["io", "stacks", "--json", "--by", "count", "--top", "3", rec.to_str().unwrap()]);
    let groups = doc["groups"].as_array().unwrap();
    assert!(!groups.is_empty(), "{doc}");
    for g in groups {
        let locations = g["locations"].as_array().unwrap();
        assert!(!locations.is_empty(), "every call has its stack: {g}");
        for l in locations {
            assert!(l["frames"].as_array().unwrap().len() >= 3, "{l}");
        }
    }
    let table = ok(&["io", "stacks", rec.to_str().unwrap()]);
    assert!(table.contains("calls,"), "{table}");
    let _ = std::fs::remove_dir_all(&dir);
}
