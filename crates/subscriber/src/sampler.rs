//! Head sampling: the standard `OTEL_TRACES_SAMPLER` / `OTEL_TRACES_SAMPLER_ARG` settings.
//!
//! | `OTEL_TRACES_SAMPLER` | decision |
//! |---|---|
//! | `always_on` | every trace |
//! | `always_off` | no trace |
//! | `traceidratio` | a root with probability `OTEL_TRACES_SAMPLER_ARG` (default 1.0) |
//! | `parentbased_always_on` (default) | the parent's sampled flag; roots: always |
//! | `parentbased_always_off` | the parent's sampled flag; roots: never |
//! | `parentbased_traceidratio` | the parent's sampled flag; roots: by ratio |
//!
//! The ratio decision is a function of the trace id alone (its 56 low bits, as the W3C random
//! trace-id flag and OpenTelemetry's consistent probability sampling use them), so every process
//! that sees a trace decides the same way.

use ringtrace_core::TraceId;

/// Environment variable: the sampler's name.
pub const SAMPLER_ENV: &str = "OTEL_TRACES_SAMPLER";
/// Environment variable: the sampler's argument (the ratio for `*traceidratio`).
pub const SAMPLER_ARG_ENV: &str = "OTEL_TRACES_SAMPLER_ARG";

/// A head-sampling decision rule.
#[derive(Debug, Clone, PartialEq)]
#[non_exhaustive]
pub enum Sampler {
    /// Sample every span.
    AlwaysOn,
    /// Sample no span.
    AlwaysOff,
    /// Sample a trace with this probability (0.0 ..= 1.0), decided from its trace id.
    TraceIdRatio(f64),
    /// Follow the parent's sampled flag; decide roots with the inner sampler.
    ParentBased(Box<Sampler>),
}

impl Default for Sampler {
    /// `parentbased_always_on`, the OpenTelemetry default.
    fn default() -> Self {
        Sampler::ParentBased(Box::new(Sampler::AlwaysOn))
    }
}

/// 2^56: the range of the trace id's random low bits.
const RANDOM_RANGE: f64 = (1u64 << 56) as f64;
const RANDOM_MASK: u128 = (1u128 << 56) - 1;

impl Sampler {
    /// Whether a span of trace `trace_id` is sampled. `parent_sampled` is the parent's sampled
    /// flag (local or remote), `None` for a root span.
    #[inline]
    pub fn should_sample(&self, trace_id: TraceId, parent_sampled: Option<bool>) -> bool {
        // The common cases (the default sampler among them) without a call.
        match (self, parent_sampled) {
            (Sampler::AlwaysOn, _) => true,
            (Sampler::ParentBased(_), Some(sampled)) => sampled,
            (Sampler::ParentBased(root), None) if matches!(**root, Sampler::AlwaysOn) => true,
            _ => self.decide(trace_id, parent_sampled),
        }
    }

    fn decide(&self, trace_id: TraceId, parent_sampled: Option<bool>) -> bool {
        match self {
            Sampler::AlwaysOn => true,
            Sampler::AlwaysOff => false,
            Sampler::TraceIdRatio(ratio) => {
                // Keep when the random bits reach the rejection threshold (1 - p)·2^56.
                let threshold = ((1.0 - ratio.clamp(0.0, 1.0)) * RANDOM_RANGE) as u128;
                trace_id.get() & RANDOM_MASK >= threshold
            }
            Sampler::ParentBased(root) => match parent_sampled {
                Some(sampled) => sampled,
                None => root.should_sample(trace_id, None),
            },
        }
    }

    /// Parses a sampler name and its argument, as in `OTEL_TRACES_SAMPLER` and
    /// `OTEL_TRACES_SAMPLER_ARG`. The error says which part is wrong.
    pub fn parse(name: &str, arg: Option<&str>) -> Result<Self, SamplerError> {
        let ratio = || -> Result<f64, SamplerError> {
            let Some(arg) = arg.map(str::trim).filter(|a| !a.is_empty()) else { return Ok(1.0) };
            match arg.parse::<f64>() {
                Ok(r) if (0.0..=1.0).contains(&r) => Ok(r),
                _ => Err(SamplerError {
                    var: SAMPLER_ARG_ENV,
                    value: arg.to_owned(),
                    reason: "is not a ratio between 0 and 1".into(),
                }),
            }
        };
        let sampler = match name.trim().to_ascii_lowercase().as_str() {
            "always_on" => Sampler::AlwaysOn,
            "always_off" => Sampler::AlwaysOff,
            "traceidratio" => Sampler::TraceIdRatio(ratio()?),
            "parentbased_always_on" => Sampler::ParentBased(Box::new(Sampler::AlwaysOn)),
            "parentbased_always_off" => Sampler::ParentBased(Box::new(Sampler::AlwaysOff)),
            "parentbased_traceidratio" => Sampler::ParentBased(Box::new(Sampler::TraceIdRatio(ratio()?))),
            _ => {
                return Err(SamplerError {
                    var: SAMPLER_ENV,
                    value: name.to_owned(),
                    reason: "is not a supported sampler (always_on, always_off, traceidratio, \
                             parentbased_always_on, parentbased_always_off, parentbased_traceidratio)"
                        .into(),
                })
            }
        };
        Ok(sampler)
    }

    /// The sampler the environment asks for; the default (`parentbased_always_on`) when
    /// `OTEL_TRACES_SAMPLER` is unset.
    pub fn from_env() -> Result<Self, SamplerError> {
        Self::from_lookup(|var| std::env::var(var).ok())
    }

    /// [`from_env`](Self::from_env) over any variable lookup (for tests and embedding).
    pub fn from_lookup(lookup: impl Fn(&str) -> Option<String>) -> Result<Self, SamplerError> {
        match lookup(SAMPLER_ENV) {
            Some(name) if !name.trim().is_empty() => Self::parse(&name, lookup(SAMPLER_ARG_ENV).as_deref()),
            _ => Ok(Self::default()),
        }
    }
}

/// A malformed sampler setting: the variable, its value, and what is wrong.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{var}={value:?} {reason}")]
pub struct SamplerError {
    /// `OTEL_TRACES_SAMPLER` or `OTEL_TRACES_SAMPLER_ARG`.
    pub var: &'static str,
    /// The offending value.
    pub value: String,
    /// What is wrong with it.
    pub reason: String,
}

impl From<SamplerError> for crate::Error {
    fn from(e: SamplerError) -> Self {
        crate::Error::Core(ringtrace_core::Error::Config { var: e.var, value: e.value, reason: e.reason })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::collections::HashMap;

    fn trace(low56: u128) -> TraceId {
        TraceId::new((0xabcd_u128 << 100) | low56).unwrap()
    }

    fn lookup(vars: &[(&str, &str)]) -> impl Fn(&str) -> Option<String> {
        let map: HashMap<String, String> = vars.iter().map(|(k, v)| (k.to_string(), v.to_string())).collect();
        move |k| map.get(k).cloned()
    }

    #[test]
    fn names_parse_and_default_is_parent_based_always_on() {
        assert_eq!(Sampler::from_lookup(lookup(&[])).unwrap(), Sampler::default());
        assert_eq!(Sampler::from_lookup(lookup(&[(SAMPLER_ENV, " ")])).unwrap(), Sampler::default());
        assert_eq!(Sampler::parse("always_on", None).unwrap(), Sampler::AlwaysOn);
        assert_eq!(Sampler::parse("ALWAYS_OFF", Some("0.3")).unwrap(), Sampler::AlwaysOff);
        assert_eq!(Sampler::parse("traceidratio", None).unwrap(), Sampler::TraceIdRatio(1.0));
        assert_eq!(
            Sampler::from_lookup(lookup(&[
                (SAMPLER_ENV, "parentbased_traceidratio"),
                (SAMPLER_ARG_ENV, "0.25")
            ]))
            .unwrap(),
            Sampler::ParentBased(Box::new(Sampler::TraceIdRatio(0.25)))
        );
        assert_eq!(
            Sampler::parse("parentbased_always_off", None).unwrap(),
            Sampler::ParentBased(Box::new(Sampler::AlwaysOff))
        );
    }

    #[test]
    fn malformed_values_name_the_variable_and_value() {
        for (name, arg, var, value) in [
            ("jaeger_remote", None, SAMPLER_ENV, "jaeger_remote"),
            ("traceidratio", Some("half"), SAMPLER_ARG_ENV, "half"),
            ("traceidratio", Some("1.5"), SAMPLER_ARG_ENV, "1.5"),
            ("parentbased_traceidratio", Some("-0.1"), SAMPLER_ARG_ENV, "-0.1"),
            ("traceidratio", Some("NaN"), SAMPLER_ARG_ENV, "NaN"),
        ] {
            let e = Sampler::parse(name, arg).unwrap_err();
            assert_eq!((e.var, e.value.as_str()), (var, value));
            let msg = crate::Error::from(e).to_string();
            assert!(msg.contains(var) && msg.contains(&format!("{value:?}")), "{msg}");
        }
    }

    #[test]
    fn ratio_follows_the_low_56_bits() {
        let half = Sampler::TraceIdRatio(0.5);
        assert!(!half.should_sample(trace(0), None));
        assert!(!half.should_sample(trace((1 << 55) - 1), None));
        assert!(half.should_sample(trace(1 << 55), None));
        assert!(half.should_sample(trace(RANDOM_MASK), None));
        // High bits do not matter.
        assert!(half.should_sample(TraceId::new((1u128 << 127) | (1 << 55)).unwrap(), None));
        assert!(Sampler::TraceIdRatio(1.0).should_sample(trace(0), None));
        assert!(!Sampler::TraceIdRatio(0.0).should_sample(trace(RANDOM_MASK), None));
    }

    #[test]
    fn ratio_keeps_about_that_fraction() {
        let s = Sampler::TraceIdRatio(0.1);
        let mut ids = ringtrace_core::ids::IdGenerator::new(42, 1);
        let kept = (0..100_000).filter(|_| s.should_sample(ids.trace_id(), None)).count();
        assert!((9_000..11_000).contains(&kept), "{kept}");
    }

    #[test]
    fn parent_based_follows_the_parent() {
        for root in [Sampler::AlwaysOn, Sampler::AlwaysOff, Sampler::TraceIdRatio(0.5)] {
            let s = Sampler::ParentBased(Box::new(root.clone()));
            for id in [trace(0), trace(RANDOM_MASK)] {
                assert!(s.should_sample(id, Some(true)));
                assert!(!s.should_sample(id, Some(false)));
                assert_eq!(s.should_sample(id, None), root.should_sample(id, None));
            }
        }
        // A non-parent-based sampler ignores the parent.
        assert!(Sampler::AlwaysOn.should_sample(trace(1), Some(false)));
    }
}
