//! Reading inputs for the top-level views (`anomalies`, `flame`, `report`): spans without the
//! attributes, events and links those views never read, so a large recording takes a fraction
//! of the memory.

use std::path::PathBuf;

use ringtrace_analysis::{for_each_batch, list_inputs, Dataset, ReadError};

/// Reads every input file (directories expanded) into one dataset of compact spans, calling
/// `on_file(done, total)` after each file.
pub fn read_compact(paths: &[PathBuf], on_file: &mut dyn FnMut(usize, usize)) -> Result<Dataset, ReadError> {
    let mut data = Dataset::default();
    let files = list_inputs(paths)?;
    let total = files.len();
    for (done, file) in files.iter().enumerate() {
        let base = data.processes.len();
        for_each_batch(file, &mut |batch| {
            let index = base + batch.process_index;
            if index >= data.processes.len() {
                data.processes.resize_with(index + 1, Default::default);
            }
            data.processes[index] = batch.process.clone();
            data.spans.extend(batch.spans.into_iter().map(|mut span| {
                span.process = index;
                span.attributes = Vec::new();
                span.events = Vec::new();
                span.links = Vec::new();
                span
            }));
        })?;
        on_file(done + 1, total);
    }
    Ok(data)
}
