//! An `strace` log as a dataset of I/O spans, tagged with the host it was taken on: what
//! `ringtrace io import` writes.

use std::collections::BTreeMap;

use super::calls::record_to_span;
use super::strace::StraceLog;
use crate::model::{Dataset, Process, Value};

/// The dataset of `log`'s I/O calls, on node `host`: one process per traced process, named
/// (its daemon) by `names`, else by the program it ran, else `pid-N`.
pub fn import_strace(log: &StraceLog, host: &str, names: &BTreeMap<u32, String>) -> Dataset {
    let mut data = Dataset::default();
    let mut index: BTreeMap<u32, usize> = BTreeMap::new();
    for (n, record) in log.records.iter().enumerate() {
        let process = *index.entry(record.pid).or_insert_with(|| {
            let daemon = names
                .get(&record.pid)
                .or_else(|| log.programs.get(&record.pid))
                .cloned()
                .unwrap_or_else(|| format!("pid-{}", record.pid));
            data.processes.push(Process {
                node: host.to_owned(),
                daemon,
                pid: Some(record.pid),
                attributes: vec![("ringtrace.import".into(), Value::Str("strace".into()))],
                ..Process::default()
            });
            data.processes.len() - 1
        });
        let p = &data.processes[process];
        let span = record_to_span(record, &p.node, &p.daemon, process, n);
        data.spans.push(span);
    }
    data
}
