//! The core error type.

/// Errors from configuration and I/O in ringtrace.
#[derive(Debug, thiserror::Error)]
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
