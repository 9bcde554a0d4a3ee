//! `selfcap watch --exec CMD`: run CMD through `sh -c` with the new head on
//! its stdin, one at a time. The watch waits for it (heads keep arriving in
//! order; while CMD runs the socket is not read, and if the connection drops
//! meanwhile the reconnect's first frame is the current head, so nothing is
//! lost). CMD's stdout and stderr are the watch's own.

use std::io::Write;
use std::process::{Command, Stdio};

/// Runs `cmd` with `line` and a newline on stdin and waits for it. `Err`:
/// it could not start, or did not exit 0 (the message says which).
pub fn run_hook(cmd: &str, line: &str) -> Result<(), String> {
    let mut child = Command::new("sh")
        .arg("-c")
        .arg(cmd)
        .stdin(Stdio::piped())
        .spawn()
        .map_err(|e| format!("cannot run sh -c {cmd:?}: {e}"))?;
    if let Some(mut stdin) = child.stdin.take() {
        // A head is far below a pipe's buffer, so this never blocks on a CMD
        // that does not read; one that exits first gives EPIPE, which is fine.
        let _ = stdin
            .write_all(line.as_bytes())
            .and_then(|_| stdin.write_all(b"\n"));
    }
    let status = child
        .wait()
        .map_err(|e| format!("sh -c {cmd:?}: cannot wait for it: {e}"))?;
    if status.success() {
        Ok(())
    } else {
        Err(format!("sh -c {cmd:?} failed ({status})"))
    }
}

#[cfg(all(test, unix))]
mod tests {
    use super::*;

    #[test]
    fn the_head_is_on_stdin_and_failures_are_reported() {
        let dir = std::env::temp_dir().join(format!("selfcap-hook-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let out = dir.join("heads");
        let cmd = format!("cat >> '{}'", out.display());
        run_hook(&cmd, r#"{"seq":1}"#).unwrap();
        run_hook(&cmd, r#"{"seq":2}"#).unwrap();
        assert_eq!(
            std::fs::read_to_string(&out).unwrap(),
            "{\"seq\":1}\n{\"seq\":2}\n"
        );
        let e = run_hook("exit 3", "{}").unwrap_err();
        assert!(e.contains("exit 3") && e.contains('3'), "{e}");
        // A command that never reads its stdin is fine.
        run_hook("true", &"x".repeat(2000)).unwrap();
        std::fs::remove_dir_all(&dir).unwrap();
    }
}
