//! Carriers: where [`inject`](super::inject) writes headers and [`extract`](super::extract)
//! reads them.

use std::collections::{BTreeMap, HashMap};
use std::hash::BuildHasher;

/// A header map that [`inject`](super::inject) can write to.
pub trait Injector {
    /// Sets `key` to `value`, replacing what the carrier held under `key`.
    fn set(&mut self, key: &str, value: String);
}

/// A header map that [`extract`](super::extract) can read from.
pub trait Extractor {
    /// The value under `key`, if any.
    fn get(&self, key: &str) -> Option<&str>;
}

/// Keys are stored as given; lookups try the exact key first, then ignore ASCII case (HTTP
/// header names are case-insensitive).
impl<S: BuildHasher> Injector for HashMap<String, String, S> {
    fn set(&mut self, key: &str, value: String) {
        self.insert(key.to_owned(), value);
    }
}

impl<S: BuildHasher> Extractor for HashMap<String, String, S> {
    fn get(&self, key: &str) -> Option<&str> {
        HashMap::get(self, key)
            .or_else(|| self.iter().find(|(k, _)| k.eq_ignore_ascii_case(key)).map(|(_, v)| v))
            .map(String::as_str)
    }
}

/// Keys are stored as given; lookups try the exact key first, then ignore ASCII case.
impl Injector for BTreeMap<String, String> {
    fn set(&mut self, key: &str, value: String) {
        self.insert(key.to_owned(), value);
    }
}

impl Extractor for BTreeMap<String, String> {
    fn get(&self, key: &str) -> Option<&str> {
        BTreeMap::get(self, key)
            .or_else(|| self.iter().find(|(k, _)| k.eq_ignore_ascii_case(key)).map(|(_, v)| v))
            .map(String::as_str)
    }
}

/// Removes every pair whose key matches `key` ignoring ASCII case, then appends `(key, value)`.
impl Injector for Vec<(String, String)> {
    fn set(&mut self, key: &str, value: String) {
        self.retain(|(k, _)| !k.eq_ignore_ascii_case(key));
        self.push((key.to_owned(), value));
    }
}

/// The first pair whose key matches ignoring ASCII case.
impl Extractor for [(String, String)] {
    fn get(&self, key: &str) -> Option<&str> {
        self.iter().find(|(k, _)| k.eq_ignore_ascii_case(key)).map(|(_, v)| v.as_str())
    }
}

/// The first pair whose key matches ignoring ASCII case.
impl Extractor for Vec<(String, String)> {
    fn get(&self, key: &str) -> Option<&str> {
        <[(String, String)] as Extractor>::get(self, key)
    }
}

/// Replaces the values under `key`. A key that is not a valid header name, or a value that is
/// not a valid header value, is not set; [`inject`](super::inject) produces neither.
#[cfg(feature = "http")]
impl Injector for http::HeaderMap {
    fn set(&mut self, key: &str, value: String) {
        let name = http::HeaderName::from_bytes(key.as_bytes());
        let value = http::HeaderValue::try_from(value);
        if let (Ok(name), Ok(value)) = (name, value) {
            self.insert(name, value);
        }
    }
}

/// The first value under `key` that is visible ASCII. Values that are not are skipped and
/// counted in [`malformed_count`](super::malformed_count). With several `baggage` headers only
/// the first is read.
#[cfg(feature = "http")]
impl Extractor for http::HeaderMap {
    fn get(&self, key: &str) -> Option<&str> {
        for value in self.get_all(key) {
            match value.to_str() {
                Ok(s) => return Some(s),
                Err(_) => super::note_malformed(),
            }
        }
        None
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn maps_match_exact_keys_first_then_ignore_case() {
        let mut map: HashMap<String, String> = HashMap::new();
        map.insert("TraceParent".into(), "upper".into());
        assert_eq!(Extractor::get(&map, "traceparent"), Some("upper"));
        map.set("traceparent", "lower".into());
        assert_eq!(Extractor::get(&map, "traceparent"), Some("lower"));
        assert_eq!(Extractor::get(&map, "baggage"), None);

        let mut tree = BTreeMap::new();
        tree.insert("BAGGAGE".to_owned(), "b".to_owned());
        assert_eq!(Extractor::get(&tree, "baggage"), Some("b"));
        tree.set("baggage", "c".into());
        assert_eq!(Extractor::get(&tree, "baggage"), Some("c"));
    }

    #[test]
    fn vec_set_replaces_and_get_ignores_case() {
        let mut pairs = vec![("Baggage".to_owned(), "old".to_owned()), ("x".into(), "y".into())];
        pairs.set("baggage", "new".into());
        assert_eq!(pairs, [("x".to_owned(), "y".to_owned()), ("baggage".into(), "new".into())]);
        assert_eq!(Extractor::get(&pairs, "BAGGAGE"), Some("new"));
        assert_eq!(Extractor::get(pairs.as_slice(), "x"), Some("y"));
        assert_eq!(Extractor::get(&pairs, "z"), None);
    }

    #[cfg(feature = "http")]
    #[test]
    fn header_map_skips_and_counts_invalid_values() {
        let mut headers = http::HeaderMap::new();
        headers.set("traceparent", "a".into());
        headers.set("traceparent", "b".into());
        assert_eq!(Extractor::get(&headers, "traceparent"), Some("b"));
        assert_eq!(headers.get_all("traceparent").iter().count(), 1);
        headers.set("bad name", "v".into());
        headers.set("k", "bad\nvalue".into());
        assert_eq!(headers.len(), 1);

        headers.append("baggage", http::HeaderValue::from_bytes(b"caf\xe9").unwrap());
        headers.append("baggage", http::HeaderValue::from_static("request.id=1"));
        let before = super::super::malformed_count();
        assert_eq!(Extractor::get(&headers, "Baggage"), Some("request.id=1"));
        assert!(super::super::malformed_count() > before);
    }
}
