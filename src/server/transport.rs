//! LSP's framing over stdio: `Content-Length` headers, then a JSON body. Hand-rolled around
//! lsp-server's message types (rather than its `Connection::stdio`) for one reason: a
//! malformed message must be answered with a parse error and skipped, not end the session.

use std::io::{self, BufRead, Write};

use crossbeam_channel::{Receiver, bounded};
use lsp_server::Message;

pub enum Incoming {
    Message(Message),
    /// A frame whose body is not a JSON-RPC message: answered with a parse error.
    Malformed(String),
}

/// Reads frames from stdin on a thread of its own; the channel closes at end of input.
pub fn read_stdin() -> Receiver<Incoming> {
    let (sender, receiver) = bounded(16);
    std::thread::spawn(move || {
        let stdin = io::stdin();
        let mut input = stdin.lock();
        while let Some(frame) = read_frame(&mut input) {
            let incoming = match frame {
                Ok(body) => match serde_json::from_slice::<Message>(&body) {
                    Ok(message) => Incoming::Message(message),
                    Err(error) => Incoming::Malformed(format!("malformed message: {error}")),
                },
                Err(error) => Incoming::Malformed(error),
            };
            if sender.send(incoming).is_err() {
                break;
            }
        }
    });
    receiver
}

/// One frame's body, an error for a frame that cannot be read (the reader then looks for the
/// next header), or None at end of input.
fn read_frame(input: &mut impl BufRead) -> Option<Result<Vec<u8>, String>> {
    let mut length: Option<usize> = None;
    let mut line = String::new();
    let mut bad_header = None;
    loop {
        line.clear();
        match input.read_line(&mut line) {
            Ok(0) | Err(_) => return None,
            Ok(_) => {}
        }
        let header = line.trim_end_matches(['\r', '\n']);
        if header.is_empty() {
            if length.is_some() {
                break;
            }
            continue;
        }
        match header.split_once(':') {
            Some((name, value)) if name.eq_ignore_ascii_case("content-length") => {
                match value.trim().parse::<usize>() {
                    Ok(value) => length = Some(value),
                    Err(_) => bad_header = Some(format!("bad Content-Length `{}`", value.trim())),
                }
            }
            Some(_) => {}
            None => bad_header = Some(format!("malformed header `{header}`")),
        }
    }
    let length = length?;
    let mut body = vec![0; length];
    if input.read_exact(&mut body).is_err() {
        return None;
    }
    Some(match bad_header {
        Some(error) => Err(error),
        None => Ok(body),
    })
}

/// Writes one message to stdout, framed.
pub fn write(message: &Message) -> io::Result<()> {
    let mut out = io::stdout().lock();
    message.write(&mut out)?;
    out.flush()
}

/// A JSON-RPC parse error (id null, as the spec says for requests that could not be read).
pub fn write_parse_error(message: &str) -> io::Result<()> {
    let body = serde_json::json!({
        "jsonrpc": "2.0",
        "id": null,
        "error": { "code": -32700, "message": message },
    })
    .to_string();
    let mut out = io::stdout().lock();
    write!(out, "Content-Length: {}\r\n\r\n{body}", body.len())?;
    out.flush()
}
