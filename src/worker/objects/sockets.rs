//! What every object holding watchers does with their sockets (the agent's
//! watchers, the feed objects'): a watcher says only `ping` (`core::watch`
//! decides what anything else gets), and a close is completed, since the
//! runtime does not answer a hibernatable socket's close itself.

use crate::core::watch::{self, Answer, Incoming};
use worker::{WebSocket, WebSocketIncomingMessage};

/// Answers a watcher's message: `pong`, or the close `core::watch` decides.
pub fn answer(ws: &WebSocket, message: &WebSocketIncomingMessage) -> worker::Result<()> {
    let incoming = match message {
        WebSocketIncomingMessage::String(t) => Incoming::Text(t),
        WebSocketIncomingMessage::Binary(b) => Incoming::Binary(b.len()),
    };
    match watch::answer(incoming) {
        Answer::Pong => ws.send_with_str(watch::PONG),
        Answer::Close(c) => ws.close(Some(c.code()), Some(c.reason())),
    }
}

/// Completes a closing handshake the watcher started, echoing its code
/// where WebSocket allows it, or the client waits for the answer.
pub fn complete_close(ws: &WebSocket, code: usize) {
    let code = u16::try_from(code).ok().and_then(watch::echo);
    let _ = match code {
        Some(c) => ws.close(Some(c), Some("bye")),
        None => ws.close::<&str>(None, None),
    };
}
