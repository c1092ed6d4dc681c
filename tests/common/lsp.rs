//! `torchlint server` spoken to over its stdio: the process, with the messages it writes read
//! on a thread (LSP framing: `Content-Length` headers, then a JSON body).

use std::io::{BufRead, BufReader, Read, Write};
use std::path::Path;
use std::process::{Child, ChildStdin, Command, Stdio};
use std::sync::mpsc::{Receiver, channel};

use serde_json::Value;

pub struct ServerProcess {
    pub child: Child,
    pub stdin: ChildStdin,
    /// Every message the server writes, in order; closed when its stdout is.
    pub messages: Receiver<Value>,
}

/// Starts `torchlint server` in `dir` with these extra environment variables.
pub fn spawn(dir: &Path, env: &[(&str, &str)]) -> ServerProcess {
    let mut child = Command::new(env!("CARGO_BIN_EXE_torchlint"))
        .arg("server")
        .envs(env.iter().copied())
        .current_dir(dir)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .expect("start the server");
    let stdin = child.stdin.take().unwrap();
    let stdout = child.stdout.take().unwrap();
    let (sender, messages) = channel();
    std::thread::spawn(move || {
        let mut reader = BufReader::new(stdout);
        loop {
            let mut length = 0;
            loop {
                let mut line = String::new();
                if reader.read_line(&mut line).unwrap_or(0) == 0 {
                    return;
                }
                let line = line.trim_end();
                if line.is_empty() {
                    break;
                }
                if let Some(value) = line.strip_prefix("Content-Length: ") {
                    length = value.parse().unwrap();
                }
            }
            let mut body = vec![0; length];
            if reader.read_exact(&mut body).is_err() {
                return;
            }
            let _ = sender.send(serde_json::from_slice(&body).unwrap());
        }
    });
    ServerProcess {
        child,
        stdin,
        messages,
    }
}

/// Writes one message body, framed.
pub fn write_message(stdin: &mut ChildStdin, body: &str) {
    write!(stdin, "Content-Length: {}\r\n\r\n{body}", body.len()).unwrap();
    stdin.flush().unwrap();
}
