//! The core error type.

/// Errors from configuration and I/O in ringtrace.
///
/// `Debug` prints the same sentence as `Display` (as `anyhow::Error` does), so that
/// `fn main() -> Result<(), ringtrace::Error>` ends with a message a person can read.
#[derive(thiserror::Error)]
#[non_exhaustive]
pub enum Error {
    /// A configuration value (environment variable or builder setting) is malformed.
    #[error("{var}={value:?} {reason}")]
    Config {
        /// The variable or setting.
        var: &'static str,
        /// The offending value.
        value: String,
        /// What is wrong with it.
        reason: String,
    },
    /// An I/O operation failed.
    #[error("{context}: {source}")]
    Io {
        /// What was being done, with the path.
        context: String,
        /// The underlying error.
        #[source]
        source: std::io::Error,
    },
}

impl std::fmt::Debug for Error {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        std::fmt::Display::fmt(self, f)
    }
}

#[cfg(test)]
mod tests {
    use super::Error;

    #[test]
    fn debug_reads_like_display() {
        let e = Error::Config {
            var: "RINGTRACE_RING_CAPACITY",
            value: "lots".into(),
            reason: "is not a number".into(),
        };
        assert_eq!(format!("{e:?}"), r#"RINGTRACE_RING_CAPACITY="lots" is not a number"#);
        let io = Error::Io {
            context: "creating /nowhere".into(),
            source: std::io::Error::new(std::io::ErrorKind::NotFound, "no such directory"),
        };
        assert_eq!(format!("{io:?}"), "creating /nowhere: no such directory");
    }
}
