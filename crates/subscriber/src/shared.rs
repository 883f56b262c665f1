//! State shared by the layer (application threads), the handle and the drain thread.

use std::sync::atomic::{AtomicBool, AtomicU32, AtomicU64, AtomicUsize, Ordering};
use std::sync::Arc;
use std::sync::Mutex;

use ringtrace_core::hash::GOLDEN;
use ringtrace_core::raw::RawRecord;
use ringtrace_core::{Clock, Identity};

use crate::local::filter::TargetFilter;
use crate::local::table::SpanTable;
use crate::local::RingHandle;
use crate::ring::{Consumer, Producer};

/// A ring's consumer end and what identifies it, while no thread writes it.
pub(crate) struct PooledRing {
    pub cons: Consumer<RawRecord>,
    /// Its number in the process (its file's name).
    pub number: u32,
    /// Its file, when it is kept in one.
    #[cfg(all(unix, not(ringtrace_loom)))]
    pub file: Option<Arc<crate::ringfile::Mapped>>,
}

/// Settings fixed when the collector starts.
#[derive(Debug, Clone)]
pub(crate) struct Config {
    pub identity: Identity,
    /// Records per thread ring.
    pub ring_capacity: usize,
    /// Events a span keeps.
    pub span_event_limit: usize,
    /// Concurrently open spans the table holds.
    pub max_open_spans: usize,
    pub targets: TargetFilter,
    /// How long the drain sleeps when every ring was empty.
    pub drain_interval: std::time::Duration,
    /// Spans per batch handed to sinks.
    pub batch_size: usize,
    /// Print nothing to stderr.
    pub quiet: bool,
    /// Head sampling of new traces.
    pub sampler: crate::Sampler,
}

static NEXT_COLLECTOR: AtomicU64 = AtomicU64::new(1);

/// This process's id once read; 0 before, and in a child made by `fork` until it reads its own.
static PROCESS_ID: AtomicU32 = AtomicU32::new(0);

/// This process's id, without a system call each time (glibc no longer caches `getpid`, and a
/// new thread asks several times whether it runs in a child made by `fork`). A child made by
/// `fork` forgets the parent's through a `pthread_atfork` handler; the id is kept only once that
/// handler is registered, and nothing here blocks, so a `fork` at any moment leaves a child that
/// reads its own. (A child made without the C library's `fork`, by a raw `clone`, runs no
/// handler: as for the rings it inherits, ringtrace does not support recording there.)
pub(crate) fn process_id() -> u32 {
    let pid = PROCESS_ID.load(Ordering::Relaxed);
    if pid != 0 {
        return pid;
    }
    let pid = std::process::id();
    #[cfg(unix)]
    {
        /// 0: no handler yet; 1: being registered; 2: registered.
        static HANDLER: AtomicU32 = AtomicU32::new(0);
        extern "C" fn forget() {
            PROCESS_ID.store(0, Ordering::Relaxed);
        }
        if HANDLER.compare_exchange(0, 1, Ordering::AcqRel, Ordering::Acquire).is_ok() {
            // SAFETY: the handler only stores to an atomic, which is async-signal-safe.
            unsafe { libc::pthread_atfork(None, None, Some(forget)) };
            HANDLER.store(2, Ordering::Release);
        }
        if HANDLER.load(Ordering::Acquire) != 2 {
            return pid;
        }
    }
    PROCESS_ID.store(pid, Ordering::Relaxed);
    pid
}

/// Rings of exited threads kept for reuse, per collector.
const RING_POOL: usize = 32;

/// Wakes the drain thread early when a ring fills up while it sleeps.
///
/// The drain sleeps longer when rings stay nearly empty; a thread whose ring reaches a quarter full
/// (checked once per eighth of a ring of records, so almost never on the hot path) unparks it. The
/// wake is a single `futex` call, at most once per eighth of a ring and only while the drain sleeps;
/// it never blocks the thread.
#[derive(Default)]
pub(crate) struct DrainWaker {
    /// The drain is asleep (or about to be).
    parked: AtomicBool,
    thread: std::sync::OnceLock<std::thread::Thread>,
    /// Rings in the pool, as `Shared::pool_ring` and `take_pooled_ring` leave it.
    pooled: AtomicUsize,
    /// Threads that have released their rings so far.
    exited: AtomicU64,
}

impl DrainWaker {
    /// Called by the drain thread when it starts.
    pub(crate) fn register_current(&self) {
        let _ = self.thread.set(std::thread::current());
    }

    /// Called by the drain thread before it sleeps.
    pub(crate) fn parking(&self) {
        self.parked.store(true, Ordering::SeqCst);
    }

    /// Called by the drain thread when it wakes.
    pub(crate) fn unparked(&self) {
        self.parked.store(false, Ordering::Relaxed);
    }

    /// Wakes the drain if it sleeps.
    #[cold]
    pub(crate) fn wake(&self) {
        if self.parked.load(Ordering::Relaxed) {
            self.wake_if_parked();
        }
    }

    /// A thread released its rings: the drain takes them back on its next pass, which comes
    /// within one drain interval while exited threads' rings wait (see `Drain::run`). It is
    /// woken at once only when the pool is empty, so that the next new thread finds a ring
    /// there rather than making one. A process that starts a short-lived thread per task then
    /// pays a drain pass (and a write) per drain interval rather than one per thread, and its
    /// pool grows to what the threads started in two intervals need (up to `RING_POOL`).
    ///
    /// The count and the drain's `parked` flag pair up as in [`exits_since`](Self::exits_since):
    /// either the drain sees this exit before it sleeps, or this sees it asleep and wakes it.
    pub(crate) fn thread_exited(&self) {
        self.exited.fetch_add(1, Ordering::SeqCst);
        if self.pooled.load(Ordering::Relaxed) == 0 {
            self.wake_if_parked();
        }
    }

    /// The pool was left empty: a sleeping drain takes back the rings of threads that have
    /// exited meanwhile, so that the threads that start next find them.
    pub(crate) fn pool_emptied(&self) {
        self.wake_if_parked();
    }

    /// Unparks the drain if it announced its sleep; a read-modify-write, so that it cannot miss
    /// an announcement that [`exits_since`](Self::exits_since) made before checking the count.
    fn wake_if_parked(&self) {
        if self.parked.swap(false, Ordering::SeqCst) {
            if let Some(t) = self.thread.get() {
                t.unpark();
            }
        }
    }

    /// How many threads have released their rings so far.
    pub(crate) fn exited(&self) -> u64 {
        self.exited.load(Ordering::SeqCst)
    }

    /// Whether threads exited since the count was `seen`; called by the drain after
    /// [`parking`](Self::parking), it decides whether to sleep at all.
    pub(crate) fn exits_since(&self, seen: u64) -> bool {
        self.exited() != seen
    }

    /// Wakes the drain whether or not it announced its sleep (commands: flush, shutdown).
    pub(crate) fn wake_now(&self) {
        self.parked.store(false, Ordering::Relaxed);
        if let Some(t) = self.thread.get() {
            t.unpark();
        }
    }
}

pub(crate) struct Shared {
    /// Distinguishes collectors in thread-local storage.
    pub id: u64,
    /// The process that made the collector: a child made by `fork` has its memory but not its
    /// drain (see [`forked_away`](Self::forked_away)).
    pid: u32,
    pub paused: AtomicBool,
    /// Nothing but this collector (and level filters) consumes its dispatcher's spans and events:
    /// the standalone subscriber, or the layer as `init()` installs it. It then disables its
    /// callsites while paused (so pausing and resuming rebuild `tracing`'s interest cache).
    pub owns_callsites: AtomicBool,
    /// Set at shutdown; recording cannot resume.
    pub stopped: AtomicBool,
    pub clock: Clock,
    pub table: SpanTable,
    pub config: Config,
    pub seed: u64,
    pub next_stream: AtomicU64,
    /// Fresh open-span table keys for the standalone subscriber.
    pub keys: crate::local::keys::KeySpace,
    new_rings: Mutex<Vec<RingHandle>>,
    /// Empty rings of exited threads, kept for new threads (consumer ends; the producer end was
    /// released when its thread exited).
    ring_pool: Mutex<Vec<PooledRing>>,
    /// Rings made so far: the next one's number.
    next_ring: AtomicU32,
    /// Where rings are kept in files (with a raw recording, on Unix); `None`: in memory.
    #[cfg(all(unix, not(ringtrace_loom)))]
    pub ring_dir: Option<Arc<crate::ringfile::RingDir>>,
    /// A ring file could not be made (the message was printed once).
    #[cfg(all(unix, not(ringtrace_loom)))]
    ring_file_failed: AtomicBool,
    pub has_new_rings: AtomicBool,
    pub waker: Arc<DrainWaker>,
    /// Spans, closes and events lost outside any thread's counters: the thread's local storage
    /// was already torn down (thread exit) or re-entered (a field's `Debug` impl that traces).
    pub late_spans: AtomicU64,
    /// See `late_spans`.
    pub late_closes: AtomicU64,
    /// See `late_spans`.
    pub late_events: AtomicU64,
    /// The callsites registered so far.
    registered: crate::callsites::Registered,
}

/// The address by which records name the callsite of `meta` (`raw::meta_address`, for metadata
/// whose lifetime the type does not say, as `enabled` gets it).
#[inline]
pub(crate) fn meta_address_of(meta: &tracing_core::Metadata<'_>) -> u64 {
    meta as *const tracing_core::Metadata<'_> as usize as u64
}

impl Shared {
    pub(crate) fn new(config: Config, clock: Clock) -> Self {
        let id = NEXT_COLLECTOR.fetch_add(1, Ordering::Relaxed);
        Self {
            id,
            pid: process_id(),
            paused: AtomicBool::new(false),
            owns_callsites: AtomicBool::new(false),
            stopped: AtomicBool::new(false),
            clock,
            table: SpanTable::new(config.max_open_spans),
            // This collector's own number: collectors made at once on two threads once read
            // the same count here, and made the same ids.
            seed: ringtrace_core::ids::process_seed() ^ id.wrapping_mul(GOLDEN),
            config,
            next_stream: AtomicU64::new(0),
            keys: Default::default(),
            new_rings: Mutex::new(Vec::new()),
            ring_pool: Mutex::new(Vec::new()),
            next_ring: AtomicU32::new(1),
            #[cfg(all(unix, not(ringtrace_loom)))]
            ring_dir: None,
            #[cfg(all(unix, not(ringtrace_loom)))]
            ring_file_failed: AtomicBool::new(false),
            has_new_rings: AtomicBool::new(false),
            waker: Arc::default(),
            late_spans: AtomicU64::new(0),
            late_closes: AtomicU64::new(0),
            late_events: AtomicU64::new(0),
            registered: Default::default(),
        }
    }

    #[inline]
    pub(crate) fn is_paused(&self) -> bool {
        self.paused.load(Ordering::Relaxed)
    }

    /// Whether pausing disables the callsites ([`owns_callsites`](Self::owns_callsites)) and the
    /// collector is paused.
    #[inline]
    pub(crate) fn callsites_off(&self) -> bool {
        self.owns_callsites.load(Ordering::Relaxed) && self.is_paused()
    }

    /// Pauses or resumes recording. When the collector owns its callsites, they follow: `tracing`
    /// asks it again whether each callsite is enabled, so that a paused collector costs what a
    /// disabled callsite does.
    pub(crate) fn set_paused(&self, paused: bool) {
        if self.paused.swap(paused, Ordering::Relaxed) != paused
            && self.owns_callsites.load(Ordering::Relaxed)
        {
            tracing_core::callsite::rebuild_interest_cache();
        }
    }

    pub(crate) fn register_ring(&self, ring: RingHandle) {
        let mut rings = self.new_rings.lock().unwrap_or_else(|e| e.into_inner());
        rings.push(ring);
        self.has_new_rings.store(true, Ordering::Release);
    }

    /// Whether this is a child made by `fork` of the process that made the collector: no drain
    /// thread came along, so nothing recorded here would ever be read, and the locks the
    /// parent's threads held at the fork stay held. A thread of such a child records nothing.
    pub(crate) fn forked_away(&self) -> bool {
        process_id() != self.pid
    }

    /// Keeps an empty ring whose thread has exited, up to `RING_POOL` of them. A service that
    /// starts short-lived threads then reuses ring memory instead of allocating (and the kernel
    /// mapping and zeroing) a fresh ring per thread.
    pub(crate) fn pool_ring(&self, ring: PooledRing) {
        let mut pool = self.ring_pool.lock().unwrap_or_else(|e| e.into_inner());
        if pool.len() < RING_POOL {
            pool.push(ring);
            self.waker.pooled.store(pool.len(), Ordering::Relaxed);
            return;
        }
        #[cfg(all(unix, not(ringtrace_loom)))]
        if let (Some(file), Some(dir)) = (&ring.file, &self.ring_dir) {
            file.remove_file(dir);
        }
    }

    /// A pooled ring, if any.
    pub(crate) fn take_pooled_ring(&self) -> Option<PooledRing> {
        let ring = {
            let mut pool = self.ring_pool.lock().unwrap_or_else(|e| e.into_inner());
            let ring = pool.pop();
            self.waker.pooled.store(pool.len(), Ordering::Relaxed);
            if pool.is_empty() {
                self.waker.pool_emptied();
            }
            ring?
        };
        // In a child made by `fork`, a ring in a file is the parent's (the mapping is shared):
        // let go, never written, and not dropped either (its drop would tell the parent's
        // ring that its reader is gone).
        #[cfg(all(unix, not(ringtrace_loom)))]
        if ring.file.is_some() && !self.ring_dir.as_ref().is_some_and(|d| d.ours()) {
            std::mem::forget(ring);
            return None;
        }
        Some(ring)
    }

    /// A new ring: in a file of the ring directory when there is one (in memory, with a message
    /// once, when the file cannot be made), else in memory.
    pub(crate) fn new_ring(&self) -> (Producer<RawRecord>, PooledRing) {
        let number = self.next_ring.fetch_add(1, Ordering::Relaxed);
        #[cfg(all(unix, not(ringtrace_loom)))]
        if let Some(dir) = &self.ring_dir {
            match dir.ring(number, self.config.ring_capacity) {
                Ok(r) => return (r.prod, PooledRing { cons: r.cons, number: r.number, file: Some(r.file) }),
                Err(e) => {
                    if !self.ring_file_failed.swap(true, Ordering::Relaxed) {
                        crate::messages::message!(
                            self.config.quiet,
                            "ringtrace: a ring file in {} could not be made ({e}): rings are kept in memory instead, and records not yet written are lost if the process is killed",
                            dir.path().display()
                        );
                    }
                }
            }
        }
        let (prod, cons) = crate::ring::ring(self.config.ring_capacity);
        (
            prod,
            PooledRing {
                cons,
                number,
                #[cfg(all(unix, not(ringtrace_loom)))]
                file: None,
            },
        )
    }

    /// Registers a callsite: in the process's registry (how the drain names records back) and
    /// in the ring directory's metadata.
    pub(crate) fn register_callsite(&self, meta: ringtrace_core::record::Meta) {
        let address = ringtrace_core::raw::meta_address(meta);
        if self.registered.contains(address) {
            return;
        }
        crate::callsites::register(meta);
        #[cfg(all(unix, not(ringtrace_loom)))]
        if let Some(dir) = &self.ring_dir {
            dir.callsite(meta);
        }
        self.registered.insert(address);
    }

    /// Whether this collector registered the callsite of `meta`. `tracing` asks `enabled` about
    /// a callsite that another thread is still registering: a `false` here has the thread
    /// register it before recording (see [`crate::callsites::Registered`]).
    #[inline]
    pub(crate) fn is_registered(&self, meta: &tracing_core::Metadata<'_>) -> bool {
        self.is_registered_address(meta_address_of(meta))
    }

    /// Whether this collector registered the callsite at `address`.
    #[inline]
    pub(crate) fn is_registered_address(&self, address: u64) -> bool {
        self.registered.contains(address)
    }

    pub(crate) fn take_new_rings(&self, into: &mut Vec<RingHandle>) {
        if self.has_new_rings.swap(false, Ordering::Acquire) {
            let mut rings = self.new_rings.lock().unwrap_or_else(|e| e.into_inner());
            into.append(&mut rings);
        }
    }
}

impl std::fmt::Debug for Shared {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Shared").field("id", &self.id).field("config", &self.config).finish()
    }
}

#[cfg(test)]
pub(crate) mod fixture {
    //! A collector's shared state for unit tests: no sinks, no drain thread, a mock clock; and
    //! static callsites for them.

    /// Declares a callsite type `$callsite` and its static metadata `$meta`: name, target,
    /// level, kind and field names (no module path, file or line), as `tracing`'s macros would.
    macro_rules! test_callsite {
        ($callsite:ident, $meta:ident = $name:literal, $target:literal, $level:ident, $kind:ident, [$($field:literal),*]) => {
            struct $callsite;
            static $meta: tracing_core::Metadata<'static> = tracing_core::Metadata::new(
                $name,
                $target,
                tracing_core::Level::$level,
                None,
                None,
                None,
                tracing_core::field::FieldSet::new(&[$($field),*], tracing_core::identify_callsite!(&$callsite)),
                tracing_core::Kind::$kind,
            );
            impl tracing_core::callsite::Callsite for $callsite {
                fn set_interest(&self, _: tracing_core::subscriber::Interest) {}
                fn metadata(&self) -> &tracing_core::Metadata<'_> {
                    &$meta
                }
            }
        };
    }
    pub(crate) use test_callsite;

    use super::{Config, Shared};

    /// Where the mock clock's tick 0 falls, in Unix nanoseconds.
    pub(crate) const ANCHOR_NS: u64 = 1_000_000;

    /// Shared state with rings of `ring_capacity` records and spans that keep `span_event_limit`
    /// events; its clock reads [`ANCHOR_NS`] plus the ticks.
    pub(crate) fn shared(ring_capacity: usize, span_event_limit: usize) -> Shared {
        let config = Config {
            identity: ringtrace_core::Identity { node: "n".into(), daemon: "d".into() },
            ring_capacity,
            span_event_limit,
            max_open_spans: 64,
            targets: Default::default(),
            drain_interval: std::time::Duration::from_millis(1),
            batch_size: 512,
            sampler: crate::Sampler::AlwaysOn,
            quiet: true,
        };
        let (mock, _) = quanta::Clock::mock();
        Shared::new(config, ringtrace_core::Clock::with_anchor(mock, ANCHOR_NS))
    }
}
