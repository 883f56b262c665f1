//! The clock: raw TSC ticks on the hot path, converted to Unix nanoseconds off it.

use std::time::{SystemTime, UNIX_EPOCH};

/// A `quanta` clock with an anchor that maps its raw ticks to Unix time.
///
/// Application threads call [`Clock::raw`] (a TSC read where available, about 10 ns);
/// the drain thread converts ticks with [`Clock::unix_nanos`]. Tests pass a
/// `quanta::Clock::mock()` so no test sleeps.
#[derive(Debug, Clone)]
pub struct Clock {
    inner: quanta::Clock,
    anchor_raw: u64,
    anchor_unix_ns: u64,
    /// Anchored by the caller (tests): never re-anchored to the wall clock.
    fixed: bool,
}

impl Clock {
    /// The system clock, anchored now.
    pub fn new() -> Self {
        Self::from_quanta(quanta::Clock::new())
    }

    /// Wraps a quanta clock (real or mock), anchored to the current wall-clock time.
    pub fn from_quanta(inner: quanta::Clock) -> Self {
        let mut clock = Self::with_anchor(inner, 0);
        clock.fixed = false;
        clock.reanchor();
        clock
    }

    /// Wraps a quanta clock whose current reading is `unix_ns` (deterministic in tests); it is
    /// never re-anchored.
    pub fn with_anchor(inner: quanta::Clock, unix_ns: u64) -> Self {
        let anchor_raw = inner.raw();
        Self { inner, anchor_raw, anchor_unix_ns: unix_ns, fixed: true }
    }

    /// Maps the current raw reading to the current wall-clock time.
    ///
    /// Ticks are converted relative to the latest anchor, so an error in the calibrated tick rate
    /// only grows over the time since the last re-anchoring. The drain re-anchors on every pass
    /// (every few milliseconds), which keeps processes on one host within microseconds of each
    /// other instead of drifting apart by the calibration error times their uptime.
    pub fn reanchor(&mut self) {
        if self.fixed {
            return;
        }
        let before = self.inner.raw();
        let unix = SystemTime::now().duration_since(UNIX_EPOCH).map(|d| d.as_nanos() as u64).unwrap_or(0);
        let after = self.inner.raw();
        self.anchor_raw = before + (after.saturating_sub(before)) / 2;
        self.anchor_unix_ns = unix;
    }

    /// Raw ticks; cheap, monotonic per core, meaningless until converted.
    #[inline(always)]
    pub fn raw(&self) -> u64 {
        self.inner.raw()
    }

    /// Converts raw ticks to Unix nanoseconds.
    pub fn unix_nanos(&self, raw: u64) -> u64 {
        if raw >= self.anchor_raw {
            self.anchor_unix_ns.saturating_add(self.inner.delta_as_nanos(self.anchor_raw, raw))
        } else {
            self.anchor_unix_ns.saturating_sub(self.inner.delta_as_nanos(raw, self.anchor_raw))
        }
    }
}

impl Default for Clock {
    fn default() -> Self {
        Self::new()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reanchoring_tracks_the_wall_clock() {
        let mut clock = Clock::new();
        let raw = clock.raw();
        clock.reanchor();
        let now = SystemTime::now().duration_since(UNIX_EPOCH).unwrap().as_nanos() as u64;
        let converted = clock.unix_nanos(raw);
        assert!(converted <= now && now - converted < 1_000_000_000, "{converted} vs {now}");
    }

    #[test]
    fn mock_ticks_convert_from_anchor() {
        let (q, mock) = quanta::Clock::mock();
        let clock = Clock::with_anchor(q, 1_000_000_000);
        mock.increment(1_500);
        assert_eq!(clock.unix_nanos(clock.raw()), 1_000_001_500);
    }
}
