//! Shutting collectors down when the process exits with their guards still alive.
//!
//! A guard dropped at the end of `main` flushes everything. A process that calls
//! `std::process::exit`, returns from `main` with the guard leaked (`mem::forget`, a `static`),
//! or aborts on a panic (`panic = "abort"`) never drops it. For those, every running collector
//! is registered here, and an `atexit` handler (which `exit` runs, after `main` returns too)
//! and, under `panic = "abort"`, the panic hook shut each down as its guard would: a last pass
//! over the rings, the counters and the end frame written, the recording synced — bounded by
//! the guard's timeout. A collector whose guard is dropped leaves the list first.
//!
//! A `SIGKILL` (or `abort`) runs nothing: what the drain had not written yet stays in the ring
//! files (`crate::ringfile`), which readers and `ringtrace recover` add. The handler exists on
//! Unix only (`atexit`); elsewhere only the panic hook does this.

use std::sync::atomic::Ordering;
use std::sync::mpsc::{self, Sender};
use std::sync::{Arc, Mutex, Once};
use std::time::Duration;

use crate::drain::Command;
use crate::shared::Shared;

/// A collector whose guard is alive.
struct Running {
    shared: Arc<Shared>,
    commands: Sender<Command>,
    timeout: Duration,
    /// The process that started it: a child made by `fork` inherits the list, not the drain.
    pid: u32,
}

thread_local! {
    /// Set on drain threads: they must not wait for a drain's answer, their own included.
    static ON_DRAIN: std::cell::Cell<bool> = const { std::cell::Cell::new(false) };
}

/// Marks the calling thread as a drain thread.
pub(crate) fn on_drain_thread() {
    ON_DRAIN.with(|d| d.set(true));
}

static RUNNING: Mutex<Vec<Running>> = Mutex::new(Vec::new());

/// Registers a started collector; installs the `atexit` handler on the first call.
pub(crate) fn register(shared: Arc<Shared>, commands: Sender<Command>, timeout: Duration) {
    static AT_EXIT: Once = Once::new();
    AT_EXIT.call_once(|| {
        #[cfg(unix)]
        // SAFETY: `shut_down_at_exit` is an `extern "C" fn()` that never unwinds (it catches
        // panics), as `atexit` requires.
        unsafe {
            libc::atexit(shut_down_at_exit);
        }
    });
    let pid = std::process::id();
    RUNNING.lock().unwrap_or_else(|e| e.into_inner()).push(Running { shared, commands, timeout, pid });
}

/// Removes collector `id` (its guard is shutting it down).
pub(crate) fn unregister(id: u64) {
    RUNNING.lock().unwrap_or_else(|e| e.into_inner()).retain(|r| r.shared.id != id);
}

#[cfg(unix)]
extern "C" fn shut_down_at_exit() {
    let _ = std::panic::catch_unwind(shut_down_all);
}

/// Shuts down every registered collector, each within its guard's timeout; the caller's thread
/// waits. Called at process exit, and by the panic hook before an abort.
pub(crate) fn shut_down_all() {
    // Not from a drain thread (a sink that exits): it would wait for its own answer.
    if ON_DRAIN.try_with(std::cell::Cell::get).unwrap_or(false) {
        return;
    }
    let running = std::mem::take(&mut *RUNNING.lock().unwrap_or_else(|e| e.into_inner()));
    let pid = std::process::id();
    for r in running.into_iter().filter(|r| r.pid == pid) {
        r.shared.stopped.store(true, Ordering::Relaxed);
        r.shared.set_paused(true);
        let (tx, rx) = mpsc::channel();
        if r.commands.send(Command::Shutdown(tx)).is_ok() {
            r.shared.waker.wake_now();
            let _ = rx.recv_timeout(r.timeout);
        }
    }
}
