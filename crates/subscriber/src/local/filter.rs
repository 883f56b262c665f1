//! Include/exclude filters by target prefix, decided once per callsite and thread.

use ringtrace_core::record::Meta;

/// Target-prefix filters: a callsite is recorded when its target starts with one of `include`
/// (or `include` is empty) and with none of `exclude`.
#[derive(Debug, Clone, Default)]
pub(crate) struct TargetFilter {
    pub include: Vec<String>,
    pub exclude: Vec<String>,
}

impl TargetFilter {
    pub(crate) fn is_empty(&self) -> bool {
        self.include.is_empty() && self.exclude.is_empty()
    }

    pub(crate) fn allows_target(&self, target: &str) -> bool {
        (self.include.is_empty() || self.include.iter().any(|p| target.starts_with(p.as_str())))
            && !self.exclude.iter().any(|p| target.starts_with(p.as_str()))
    }
}

const WAYS: usize = 64;

/// A direct-mapped per-thread cache of filter decisions keyed by callsite address.
#[derive(Debug)]
pub(crate) struct CallsiteCache {
    keys: [usize; WAYS],
    allowed: [bool; WAYS],
}

impl Default for CallsiteCache {
    fn default() -> Self {
        Self { keys: [0; WAYS], allowed: [false; WAYS] }
    }
}

impl CallsiteCache {
    #[inline]
    pub(crate) fn allows(&mut self, filter: &TargetFilter, meta: Meta) -> bool {
        let key = meta as *const _ as usize;
        let slot = (key >> 4) % WAYS;
        if self.keys[slot] == key {
            return self.allowed[slot];
        }
        let ok = filter.allows_target(meta.target());
        self.keys[slot] = key;
        self.allowed[slot] = ok;
        ok
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn include_and_exclude_prefixes() {
        let f = TargetFilter { include: vec!["app".into()], exclude: vec!["app::metrics".into()] };
        assert!(f.allows_target("app::server"));
        assert!(!f.allows_target("app::metrics::gauge"));
        assert!(!f.allows_target("hyper::proto"));
        assert!(TargetFilter::default().allows_target("anything"));
    }
}
