//! Progress bars on stderr: drawn only when it is a terminal (never in a pipe or a file), so
//! scripts and `--json` output see nothing of them.

use std::path::PathBuf;

/// Where a progress bar is drawn: stderr when it is a terminal, else nowhere.
pub fn on_stderr() -> indicatif::ProgressDrawTarget {
    use std::io::IsTerminal;
    if std::io::stderr().is_terminal() {
        indicatif::ProgressDrawTarget::stderr()
    } else {
        indicatif::ProgressDrawTarget::hidden()
    }
}

/// A progress bar over input files, by their bytes: the files and bytes read so far, of all.
pub struct InputProgress {
    pub(crate) bar: indicatif::ProgressBar,
    /// The bytes of the files up to each, in reading order.
    ends: Vec<u64>,
}

impl InputProgress {
    /// A bar over `files`, in the order they are read, saying `what` is done with them, drawn
    /// to `target`. A file whose size cannot be had counts for nothing (reading it says why).
    pub fn new(files: &[PathBuf], what: &str, target: indicatif::ProgressDrawTarget) -> Self {
        let ends: Vec<u64> = files
            .iter()
            .scan(0, |end, file| {
                *end += std::fs::metadata(file).map_or(0, |m| m.len());
                Some(*end)
            })
            .collect();
        // Cleared when dropped too, as when reading fails.
        let bar = indicatif::ProgressBar::hidden().with_finish(indicatif::ProgressFinish::AndClear);
        let template = format!(
            "{{spinner}} [{{elapsed_precise}}] {{bar:30}} {{bytes}}/{{total_bytes}} {what} ({{msg}})"
        );
        bar.set_style(
            indicatif::ProgressStyle::with_template(&template)
                .unwrap_or_else(|_| indicatif::ProgressStyle::default_bar()),
        );
        bar.set_message(format!("0/{} files", ends.len()));
        bar.set_length(ends.last().copied().unwrap_or(0));
        // Drawn once it knows the total.
        bar.set_draw_target(target);
        if !bar.is_hidden() {
            bar.enable_steady_tick(std::time::Duration::from_millis(120));
        }
        Self { bar, ends }
    }

    /// `done` files of `total` read.
    pub fn file_done(&self, done: usize, total: usize) {
        self.bar.set_position(done.checked_sub(1).and_then(|i| self.ends.get(i)).copied().unwrap_or(0));
        self.bar.set_message(format!("{done}/{total} files"));
    }

    /// Clears the bar.
    pub fn finish(&self) {
        self.bar.finish_and_clear();
    }
}
