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
    /// Nanoseconds per 2³² ticks, as the clock's calibration says at the anchor.
    nanos_per_2_32_ticks: u64,
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
        let nanos_per_2_32_ticks = rate(&inner, anchor_raw);
        Self { inner, anchor_raw, anchor_unix_ns: unix_ns, fixed: true, nanos_per_2_32_ticks }
    }

    /// A clock that converts ticks as `anchor` says: ticks another process recorded, read back
    /// from its raw recording. It is never re-anchored, and its own reading means nothing.
    pub fn from_anchor(anchor: crate::raw::ClockAnchor) -> Self {
        let (inner, _) = quanta::Clock::mock();
        Self {
            inner,
            anchor_raw: anchor.raw,
            anchor_unix_ns: anchor.unix_ns,
            fixed: true,
            nanos_per_2_32_ticks: anchor.nanos_per_2_32_ticks,
        }
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
        self.nanos_per_2_32_ticks = rate(&self.inner, self.anchor_raw);
    }

    /// The anchor that converts ticks as [`unix_nanos`](Self::unix_nanos) does now, for a
    /// reader in another process (the raw recording's pass frames).
    pub fn anchor(&self) -> crate::raw::ClockAnchor {
        crate::raw::ClockAnchor {
            raw: self.anchor_raw,
            unix_ns: self.anchor_unix_ns,
            nanos_per_2_32_ticks: self.nanos_per_2_32_ticks,
        }
    }

    /// Raw ticks; cheap, monotonic per core, meaningless until converted.
    #[inline(always)]
    pub fn raw(&self) -> u64 {
        self.inner.raw()
    }

    /// Converts raw ticks to Unix nanoseconds.
    ///
    /// The conversion is [`ClockAnchor::unix_nanos`](crate::raw::ClockAnchor::unix_nanos) of
    /// [`anchor`](Self::anchor), so that a reader of a raw recording converts exactly as the
    /// recording process would have.
    pub fn unix_nanos(&self, raw: u64) -> u64 {
        self.anchor().unix_nanos(raw)
    }
}

/// Nanoseconds per 2³² ticks of `clock` at `at`, from its calibration.
fn rate(clock: &quanta::Clock, at: u64) -> u64 {
    match at.checked_add(1 << 32) {
        Some(end) => clock.delta_as_nanos(at, end),
        None => clock.delta_as_nanos(at - (1 << 32), at),
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
