//! Output: data on stdout, everything else (progress, warnings, errors) on
//! stderr as lines starting with `selfcap: `, so stdout can be piped as is;
//! and the exit code of every outcome.

use crate::client::{Error, ExitCode, Rejected, RetryNote};
use std::io::Write;
use std::time::Duration;

/// Reports a failed command on stderr; the process exit code of `result`.
pub(crate) fn exit_code(result: Result<(), Error>) -> i32 {
    match result {
        Ok(()) => ExitCode::Ok.code(),
        Err(e) => {
            report(&e);
            e.exit_code().code()
        }
    }
}

/// A panic is reported as one line, never as a Rust backtrace.
pub(crate) fn on_panic_one_line() {
    std::panic::set_hook(Box::new(|info| {
        let msg = info
            .payload()
            .downcast_ref::<&str>()
            .map(|s| s.to_string())
            .or_else(|| info.payload().downcast_ref::<String>().cloned())
            .unwrap_or_else(|| "panic".into());
        eprintln!("selfcap: internal error: {msg}");
    }));
}

fn report(e: &Error) {
    match e {
        Error::Rejected(r) => report_rejection(r),
        other => eprintln!("selfcap: {other}"),
    }
}

/// A rejection: the summary, then what to do about each code, the findings,
/// the size or the wait when given, and the exit code it leads to.
fn report_rejection(r: &Rejected) {
    let mut lines = vec![format!("selfcap: {}", r.summary())];
    for (code, action) in r.actions() {
        lines.push(format!("  {code}: {action}"));
    }
    for f in r.finding_lines() {
        lines.push(format!("  finding {f}"));
    }
    if let (Some(b), Some(o)) = (r.max_bytes, r.observed_bytes) {
        lines.push(format!("  size: {o} bytes, limit {b}"));
    }
    if let Some(secs) = r.retry_after_sec {
        let at = r.next_write_at.as_deref().unwrap_or("?");
        lines.push(format!(
            "  next write at {at} (in {secs} s); not waiting (`--wait {secs}` would wait and retry)"
        ));
    }
    let code = ExitCode::for_class(r.class());
    lines.push(format!("  exit {}: {}", code.code(), code.describe()));
    eprintln!("{}", lines.join("\n"));
}

/// Progress before a retry (the client's retry observer).
pub(crate) fn note_retry(n: &RetryNote) {
    let what = if n.reason == "HTTP 429" {
        "waiting as the service asked"
    } else {
        "retrying"
    };
    eprintln!(
        "selfcap: {} {}: {}; {what} in {} (attempt {} of {})",
        n.method,
        n.url,
        n.reason,
        human_secs(n.wait),
        n.attempt + 1,
        n.max_attempts
    );
}

fn human_secs(d: Duration) -> String {
    if d < Duration::from_secs(10) {
        format!("{:.1} s", d.as_secs_f64())
    } else {
        format!("{} s", d.as_secs())
    }
}

/// Pretty JSON and a newline on stdout.
pub(crate) fn print_json<T: serde::Serialize + ?Sized>(v: &T) {
    let text = serde_json::to_string_pretty(v).unwrap_or_default();
    emit(&format!("{text}\n"));
}

pub(crate) fn emit(s: &str) {
    emit_bytes(s.as_bytes());
}

/// Writes to stdout; a closed pipe (`selfcap ... | head`) is not an error.
pub(crate) fn emit_bytes(b: &[u8]) {
    let mut out = std::io::stdout().lock();
    let _ = out.write_all(b).and_then(|_| out.flush());
}

/// One line on stdout, flushed at once (`watch`); false when stdout no
/// longer takes output (the reader went away).
pub(crate) fn emit_line(line: &str) -> bool {
    let mut out = std::io::stdout().lock();
    out.write_all(line.as_bytes())
        .and_then(|_| out.write_all(b"\n"))
        .and_then(|_| out.flush())
        .is_ok()
}

/// A progress line on stderr.
pub(crate) fn note(msg: &str) {
    eprintln!("selfcap: {msg}");
}
