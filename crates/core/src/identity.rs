//! Node and daemon: who recorded a span.
//!
//! Precedence, highest first: the builder (code), then the environment (`RINGTRACE_NODE`,
//! `OTEL_SERVICE_NAME`), then the default (the hostname, the executable's name).

use crate::Error;

/// Environment variable naming the node.
pub const NODE_ENV: &str = "RINGTRACE_NODE";
/// Environment variable naming the daemon (the OpenTelemetry service name).
pub const DAEMON_ENV: &str = "OTEL_SERVICE_NAME";

/// The node and daemon a process records as.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Identity {
    /// The machine: OTLP resource `host.name`.
    pub node: String,
    /// The process role on the node: OTLP resource `service.name`.
    pub daemon: String,
}

impl Identity {
    /// Resolves node and daemon from code overrides, then the environment, then the defaults.
    ///
    /// An environment variable that is set but empty or not UTF-8 is an error naming it.
    pub fn resolve(node: Option<&str>, daemon: Option<&str>) -> Result<Self, Error> {
        let node = match node {
            Some(n) => n.to_owned(),
            None => env_name(NODE_ENV)?.unwrap_or_else(hostname),
        };
        let daemon = match daemon {
            Some(d) => d.to_owned(),
            None => env_name(DAEMON_ENV)?.unwrap_or_else(executable_name),
        };
        Ok(Self { node, daemon })
    }
}

fn env_name(var: &'static str) -> Result<Option<String>, Error> {
    match std::env::var(var) {
        Ok(v) if v.trim().is_empty() => {
            Err(Error::Config { var, value: v, reason: "must not be empty".into() })
        }
        Ok(v) => Ok(Some(v.trim().to_owned())),
        Err(std::env::VarError::NotPresent) => Ok(None),
        Err(std::env::VarError::NotUnicode(v)) => Err(Error::Config {
            var,
            value: v.to_string_lossy().into_owned(),
            reason: "is not valid UTF-8".into(),
        }),
    }
}

/// The machine's hostname, or `"unknown-host"` when the OS will not tell.
///
/// On Unix, `gethostname(2)`; elsewhere the `COMPUTERNAME` (Windows) or `HOSTNAME` environment
/// variable.
pub fn hostname() -> String {
    os_hostname().filter(|s| !s.is_empty()).unwrap_or_else(|| "unknown-host".to_owned())
}

#[cfg(unix)]
fn os_hostname() -> Option<String> {
    let mut buf = [0u8; 256];
    // SAFETY: `buf` is a valid, writable buffer of the length passed; gethostname writes at most
    // that many bytes and we only read up to the first NUL within the buffer.
    let rc = unsafe { libc::gethostname(buf.as_mut_ptr().cast(), buf.len()) };
    if rc != 0 {
        return None;
    }
    let end = buf.iter().position(|&b| b == 0).unwrap_or(buf.len());
    std::str::from_utf8(&buf[..end]).ok().map(str::to_owned)
}

#[cfg(not(unix))]
fn os_hostname() -> Option<String> {
    hostname_from_env(|var| std::env::var(var).ok())
}

/// `COMPUTERNAME` (set by Windows), else `HOSTNAME`, when set and not blank.
#[cfg(any(not(unix), test))]
fn hostname_from_env(lookup: impl Fn(&str) -> Option<String>) -> Option<String> {
    ["COMPUTERNAME", "HOSTNAME"]
        .into_iter()
        .find_map(|var| lookup(var).map(|v| v.trim().to_owned()).filter(|v| !v.is_empty()))
}

/// The running executable's file name, or `"unknown-daemon"`.
pub fn executable_name() -> String {
    std::env::current_exe()
        .ok()
        .and_then(|p| p.file_stem().map(|s| s.to_string_lossy().into_owned()))
        .filter(|s| !s.is_empty())
        .unwrap_or_else(|| "unknown-daemon".to_owned())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn code_overrides_win() {
        let id = Identity::resolve(Some("node-9"), Some("master")).unwrap();
        assert_eq!(id, Identity { node: "node-9".into(), daemon: "master".into() });
    }

    #[test]
    fn hostname_from_the_environment_where_the_os_has_no_call() {
        let env = |vars: &'static [(&'static str, &'static str)]| {
            move |var: &str| vars.iter().find(|(k, _)| *k == var).map(|(_, v)| (*v).to_owned())
        };
        assert_eq!(
            hostname_from_env(env(&[("COMPUTERNAME", "WIN-1"), ("HOSTNAME", "h")])).as_deref(),
            Some("WIN-1")
        );
        assert_eq!(
            hostname_from_env(env(&[("COMPUTERNAME", " "), ("HOSTNAME", " h ")])).as_deref(),
            Some("h")
        );
        assert_eq!(hostname_from_env(env(&[])), None);
    }

    #[test]
    fn defaults_are_not_empty() {
        assert!(!hostname().is_empty());
        assert!(!executable_name().is_empty());
    }
}
