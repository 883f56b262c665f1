//! How a command's result ends the process: the exit status, and the error message on stderr.

use std::process::ExitCode;

/// Success, or the error and its causes on stderr and a failure status.
pub fn code(result: anyhow::Result<()>) -> ExitCode {
    match result {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("ringtrace: error: {}", error_text(&e));
            ExitCode::FAILURE
        }
    }
}

/// The error and its causes, each cause once: errors that already quote their source in their
/// own message (as `ReadError` does) would otherwise print it twice.
fn error_text(e: &anyhow::Error) -> String {
    let mut text = e.to_string();
    for cause in e.chain().skip(1) {
        let cause = cause.to_string();
        if !text.contains(&cause) {
            text.push_str(": ");
            text.push_str(&cause);
        }
    }
    text
}

/// Treats a closed stdout (`ringtrace … | head`) as success.
pub fn quiet_pipe(result: anyhow::Result<()>) -> anyhow::Result<()> {
    match result {
        Err(e)
            if e.chain().any(|c| {
                c.downcast_ref::<std::io::Error>()
                    .is_some_and(|io| io.kind() == std::io::ErrorKind::BrokenPipe)
            }) =>
        {
            Ok(())
        }
        other => other,
    }
}
