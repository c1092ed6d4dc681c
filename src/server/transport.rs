//! LSP's framing over stdio: `Content-Length` headers, then a JSON body. Hand-rolled around
//! lsp-server's message types (rather than its `Connection::stdio`) for one reason: a
//! malformed message must be answered with a parse error and skipped, not end the session.
//!
//! The reader trusts nothing it reads. A frame's body is read as its bytes arrive (never
//! allocated from the header's claim) and is at most [`MAX_FRAME_BYTES`]; a bad header line
//! costs that line; and a frame that turns out bad (a body that is not a message, a length
//! too short or too long, one that cannot be parsed or is over the limit) costs that one
//! message: the reader looks for the next `Content-Length:` in what follows, including the
//! bytes the bad frame's body took, so the requests after it are still answered.

use std::collections::VecDeque;
use std::io::{self, BufRead, Read, Write};

use crossbeam_channel::{Receiver, bounded};
use lsp_server::Message;

/// The largest body a frame may have: 64 MiB, far above any real message (the didOpen of a
/// large notebook is a few MiB). A header that claims more is answered with a parse error at
/// once, and the bytes that follow are skipped up to the next frame's header.
pub const MAX_FRAME_BYTES: u64 = 64 << 20;

/// The longest header line read: LSP's headers are short; a longer line is garbage.
const MAX_HEADER_LINE: u64 = 8 << 10;

/// The longest rest of a `Content-Length:` line found while resynchronising (spaces, digits,
/// a line end).
const MAX_LENGTH_VALUE: u64 = 64;

/// How many bytes of bad bodies the reader re-reads between two messages. A body is replayed
/// so that the frames a too-long length took are still read; but a crafted body can hold
/// headers whose bodies hold headers, each re-reading most of the bytes again. Past this
/// budget a bad body is dropped instead, which bounds the work per byte of input.
const MAX_REPLAY: u64 = 4 * MAX_FRAME_BYTES;

/// The header that starts a frame, matched without regard to case (header names are
/// case-insensitive). Its `c` occurs only once, which keeps the byte-wise scan for it simple.
const CONTENT_LENGTH: &[u8] = b"content-length:";

pub enum Incoming {
    Message(Message),
    /// Input that is not a JSON-RPC message (a bad header or frame): answered with a parse
    /// error.
    Malformed(String),
}

/// Reads frames from stdin on a thread of its own; the channel closes at end of input.
pub fn read_stdin() -> Receiver<Incoming> {
    let (sender, receiver) = bounded(16);
    std::thread::spawn(move || {
        let stdin = io::stdin();
        for incoming in FrameReader::new(stdin.lock()) {
            if sender.send(incoming).is_err() {
                break;
            }
        }
    });
    receiver
}

/// The frame reader: a state machine over the input, one message or error per item; the
/// iterator ends at end of input (or when the input cannot be read).
pub struct FrameReader<R> {
    input: Rewind<R>,
    state: State,
    /// Bytes of bad bodies replayed since the last message, and how many may be (see
    /// [`MAX_REPLAY`]).
    replayed: u64,
    replay_budget: u64,
}

enum State {
    /// Reading a frame's header lines: the `Content-Length` seen so far, and whether any
    /// header line has been (a blank line before any is a stray line end, skipped).
    Headers { length: Option<u64>, seen: bool },
    /// After a bad frame, whose error has been reported: skipping bytes up to the next
    /// `Content-Length:` that has a valid length after it, wherever it starts (a body a few
    /// bytes too short leaves its tail just before the next header, on the same line).
    Resync,
}

/// What one step of the reader came to.
enum Step {
    Yield(Incoming),
    Continue,
    End,
}

/// At the start of a frame, as after one read whole.
const FRESH: State = State::Headers {
    length: None,
    seen: false,
};

impl<R: BufRead> FrameReader<R> {
    pub fn new(input: R) -> FrameReader<R> {
        FrameReader {
            input: Rewind {
                front: VecDeque::new(),
                input,
            },
            state: FRESH,
            replayed: 0,
            replay_budget: MAX_REPLAY,
        }
    }

    /// Reads one header line and acts on it.
    fn header_line(&mut self, length: Option<u64>, seen: bool) -> Step {
        let mut line = Vec::new();
        // Bytes, not a String: a line of invalid UTF-8 is a bad header, not the end of input.
        match (&mut self.input)
            .take(MAX_HEADER_LINE)
            .read_until(b'\n', &mut line)
        {
            Ok(0) | Err(_) => return Step::End,
            Ok(_) => {}
        }
        if !line.ends_with(b"\n") {
            if (line.len() as u64) < MAX_HEADER_LINE {
                // The input ended inside a header line.
                return Step::End;
            }
            return self.lost(
                after_first(&line),
                format!("a header line longer than {MAX_HEADER_LINE} bytes"),
            );
        }
        let text = trim_line_end(&line);
        if text.is_empty() {
            return match length {
                Some(length) => self.body(length),
                // A stray line end between frames.
                None if !seen => Step::Continue,
                None => self.lost(&[], "a frame without a Content-Length header".to_owned()),
            };
        }
        match find_content_length(text) {
            Some(0) => match parse_length(&text[CONTENT_LENGTH.len()..]) {
                Some(length) if length <= MAX_FRAME_BYTES => {
                    self.state = State::Headers {
                        length: Some(length),
                        seen: true,
                    };
                    Step::Continue
                }
                // Refused on the header, before any of the body arrives: the body is skipped
                // as its bytes come, by the resynchronisation.
                Some(length) => self.lost(after_first(&line), over_limit(length)),
                None => {
                    let value = String::from_utf8_lossy(&text[CONTENT_LENGTH.len()..]);
                    self.lost(
                        after_first(&line),
                        format!("bad Content-Length `{}`", value.trim()),
                    )
                }
            },
            // Garbage glued to the front of a header (the tail of a body whose length was too
            // short, or noise): the header is found again by the resynchronisation.
            Some(start) => self.lost(
                after_first(&line),
                format!("{start} bytes of garbage before a Content-Length header"),
            ),
            None => {
                self.state = State::Headers { length, seen: true };
                let well_formed = std::str::from_utf8(text).is_ok_and(|text| text.contains(':'));
                if well_formed {
                    // Another header (Content-Type): nothing in it matters here.
                    Step::Continue
                } else {
                    // Skipped; the frame it is part of is still read.
                    Step::Yield(Incoming::Malformed(format!(
                        "malformed header line `{}`",
                        String::from_utf8_lossy(text)
                    )))
                }
            }
        }
    }

    /// Reads a body of `length` bytes (at most [`MAX_FRAME_BYTES`]) as they arrive, and
    /// parses it.
    fn body(&mut self, length: u64) -> Step {
        let mut body = Vec::new();
        // `take` + `read_to_end` grows the buffer with the bytes read, so a length that the
        // input never delivers costs no memory.
        if (&mut self.input)
            .take(length)
            .read_to_end(&mut body)
            .is_err()
        {
            return Step::End;
        }
        if (body.len() as u64) < length {
            // The length was too long for what was left: the next frames may be in the body.
            return self.lost_body(
                &body,
                format!(
                    "the input ended {} bytes into a frame of {length} bytes",
                    body.len()
                ),
            );
        }
        match serde_json::from_slice::<Message>(&body) {
            Ok(message) => {
                self.state = FRESH;
                self.replayed = 0;
                Step::Yield(Incoming::Message(message))
            }
            // A length too long takes the start of the next frame into this body; it is
            // scanned again (a JSON body cannot hold a header line of its own: a string cannot
            // hold a line end).
            Err(error) => self.lost_body(&body, format!("malformed message: {error}")),
        }
    }

    /// Gives up on the frame at hand: reports `error` once and resynchronises, scanning
    /// `replay` (what was read of the bad frame that may hold the next header) before the
    /// rest of the input. It must not be all that was read, which keeps the reader moving: a
    /// bad header line is replayed from its second byte, a body without its header.
    fn lost(&mut self, replay: &[u8], error: String) -> Step {
        self.input.unread(replay);
        self.state = State::Resync;
        Step::Yield(Incoming::Malformed(error))
    }

    /// Gives up on a frame whose body was read: the body is replayed whole (its header is
    /// behind it), within [`MAX_REPLAY`].
    fn lost_body(&mut self, body: &[u8], error: String) -> Step {
        let length = body.len() as u64;
        let replay = if self.replayed + length <= self.replay_budget {
            self.replayed += length;
            body
        } else {
            &[]
        };
        self.lost(replay, error)
    }

    /// Skips to the next `Content-Length:` that has a valid length after it.
    fn resync(&mut self) -> Step {
        let mut matched = 0;
        loop {
            let found = {
                let buffer = match self.input.fill_buf() {
                    Ok(buffer) if !buffer.is_empty() => buffer,
                    _ => return Step::End,
                };
                let mut used = 0;
                let mut found = false;
                for &byte in buffer {
                    used += 1;
                    let byte = byte.to_ascii_lowercase();
                    if byte == CONTENT_LENGTH[matched] {
                        matched += 1;
                    } else {
                        // `c` occurs once in the pattern: a failed match can only restart here.
                        matched = usize::from(byte == CONTENT_LENGTH[0]);
                    }
                    if matched == CONTENT_LENGTH.len() {
                        found = true;
                        break;
                    }
                }
                self.input.consume(used);
                found
            };
            if found {
                break;
            }
        }
        let mut rest = Vec::new();
        if (&mut self.input)
            .take(MAX_LENGTH_VALUE)
            .read_until(b'\n', &mut rest)
            .is_err()
        {
            return Step::End;
        }
        let length = if rest.ends_with(b"\n") {
            parse_length(trim_line_end(&rest))
        } else {
            None
        };
        match length {
            Some(length) if length <= MAX_FRAME_BYTES => {
                self.state = State::Headers {
                    length: Some(length),
                    seen: true,
                };
                Step::Continue
            }
            // A new frame, and a bad one: reported, and skipped.
            Some(length) => {
                self.input.unread(&rest);
                Step::Yield(Incoming::Malformed(over_limit(length)))
            }
            // Not a header after all (text that happens to say `Content-Length:`): scanned
            // on, from what follows the pattern.
            None => {
                self.input.unread(&rest);
                Step::Continue
            }
        }
    }
}

impl<R: BufRead> Iterator for FrameReader<R> {
    type Item = Incoming;

    fn next(&mut self) -> Option<Incoming> {
        loop {
            let step = match self.state {
                State::Headers { length, seen } => self.header_line(length, seen),
                State::Resync => self.resync(),
            };
            match step {
                Step::Yield(incoming) => return Some(incoming),
                Step::Continue => {}
                Step::End => return None,
            }
        }
    }
}

/// A bad header line but its first byte: the next header may start inside it.
fn after_first(line: &[u8]) -> &[u8] {
    line.get(1..).unwrap_or_default()
}

fn over_limit(length: u64) -> String {
    format!(
        "a frame of {length} bytes is over the limit of {} MiB: skipped",
        MAX_FRAME_BYTES >> 20
    )
}

fn trim_line_end(line: &[u8]) -> &[u8] {
    let line = line.strip_suffix(b"\n").unwrap_or(line);
    line.strip_suffix(b"\r").unwrap_or(line)
}

fn find_content_length(line: &[u8]) -> Option<usize> {
    line.windows(CONTENT_LENGTH.len())
        .position(|window| window.eq_ignore_ascii_case(CONTENT_LENGTH))
}

/// A `Content-Length` value: digits, with spaces or tabs around them (no sign, no overflow).
fn parse_length(value: &[u8]) -> Option<u64> {
    let value = value.trim_ascii();
    if value.is_empty() || !value.iter().all(u8::is_ascii_digit) {
        return None;
    }
    std::str::from_utf8(value).ok()?.parse().ok()
}

/// The input, with bytes put back in front of it: what a bad frame took is read again when
/// the reader resynchronises.
struct Rewind<R> {
    front: VecDeque<u8>,
    input: R,
}

impl<R> Rewind<R> {
    fn unread(&mut self, bytes: &[u8]) {
        self.front.reserve(bytes.len());
        for &byte in bytes.iter().rev() {
            self.front.push_front(byte);
        }
    }
}

impl<R: BufRead> Read for Rewind<R> {
    fn read(&mut self, out: &mut [u8]) -> io::Result<usize> {
        let available = self.fill_buf()?;
        let n = available.len().min(out.len());
        out[..n].copy_from_slice(&available[..n]);
        self.consume(n);
        Ok(n)
    }
}

impl<R: BufRead> BufRead for Rewind<R> {
    fn fill_buf(&mut self) -> io::Result<&[u8]> {
        if self.front.is_empty() {
            self.input.fill_buf()
        } else {
            // The first slice of a non-empty deque holds its first byte.
            Ok(self.front.as_slices().0)
        }
    }

    fn consume(&mut self, amount: usize) {
        if self.front.is_empty() {
            self.input.consume(amount);
        } else {
            self.front.drain(..amount);
        }
    }
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

#[cfg(test)]
mod tests {
    use std::io::BufReader;

    use proptest::prelude::*;

    use super::*;

    /// A notification whose method names it: `m{index}`.
    fn body(index: usize) -> String {
        serde_json::json!({
            "jsonrpc": "2.0",
            "method": format!("m{index}"),
            "params": { "text": "Content-Length: 12 in a string is not a header" },
        })
        .to_string()
    }

    fn frame(index: usize) -> Vec<u8> {
        let body = body(index);
        format!("Content-Length: {}\r\n\r\n{body}", body.len()).into_bytes()
    }

    /// What the reader makes of `bytes`: a method name per message, `!` and the error per
    /// malformed input.
    fn read_all(bytes: &[u8]) -> Vec<String> {
        FrameReader::new(bytes).map(describe).collect()
    }

    fn describe(incoming: Incoming) -> String {
        match incoming {
            Incoming::Message(Message::Notification(notification)) => notification.method,
            Incoming::Message(message) => format!("{message:?}"),
            Incoming::Malformed(error) => format!("!{error}"),
        }
    }

    fn messages(read: &[String]) -> Vec<&str> {
        read.iter()
            .filter(|item| !item.starts_with('!'))
            .map(String::as_str)
            .collect()
    }

    /// Input that panics when read: the stdin of a client that sends nothing more.
    struct Stalled;

    impl Read for Stalled {
        fn read(&mut self, _: &mut [u8]) -> io::Result<usize> {
            panic!("the reader waited for input it did not need");
        }
    }

    #[test]
    fn frames_with_other_headers_and_stray_line_ends_are_read() {
        let mut input = b"\r\n".to_vec();
        let second = body(1);
        input.extend(frame(0));
        input.extend(
            format!(
                "content-length:{}\r\nContent-Type: application/vscode-jsonrpc; charset=utf-8\r\n\r\n{second}",
                second.len()
            )
            .bytes(),
        );
        assert_eq!(read_all(&input), ["m0", "m1"]);
    }

    #[test]
    fn a_length_over_the_limit_is_refused_on_its_header() {
        for length in [
            "18446744073709551615",
            "4611686018427387904",
            "100000000000",
            "67108865",
        ] {
            // Nothing after the next frame arrives: the reader must not wait for the claimed
            // bytes (nor allocate them).
            let mut input = format!("Content-Length: {length}\r\n\r\n").into_bytes();
            input.extend(frame(0));
            let mut reader = FrameReader::new(BufReader::new(input.as_slice().chain(Stalled)));
            let read: Vec<String> = reader.by_ref().take(2).map(describe).collect();
            assert!(read[0].contains("over the limit of 64 MiB"), "{read:?}");
            assert_eq!(read[1], "m0");
        }
        // Too large for any integer: a bad header.
        let mut input = b"Content-Length: 99999999999999999999999\r\n\r\n".to_vec();
        input.extend(frame(0));
        let read = read_all(&input);
        assert!(read[0].starts_with("!bad Content-Length"), "{read:?}");
        assert_eq!(messages(&read), ["m0"]);
    }

    #[test]
    fn a_frame_at_the_limit_is_read() {
        // Whitespace after the message makes it up to the limit (and is quick to parse).
        let body = r#"{"jsonrpc":"2.0","method":"big"}"#;
        let padded = format!(
            "{body}{}",
            " ".repeat(MAX_FRAME_BYTES as usize - body.len())
        );
        let input = format!("Content-Length: {}\r\n\r\n{padded}", padded.len());
        assert_eq!(read_all(input.as_bytes()), ["big"]);
    }

    #[test]
    fn a_malformed_header_line_costs_that_line() {
        let mut input = b"X-Junk: \xff\xfe\r\n".to_vec();
        input.extend(frame(0));
        input.extend(b"no colon\r\n");
        input.extend(frame(1));
        let read = read_all(&input);
        assert_eq!(messages(&read), ["m0", "m1"]);
        assert_eq!(read.len(), 4, "{read:?}");
        assert!(read[0].starts_with("!malformed header line"), "{read:?}");
        // A header line without an end, longer than any header.
        let mut input = vec![b'a'; 20_000];
        input.extend(frame(0));
        let read = read_all(&input);
        assert!(read[0].starts_with("!a header line longer"), "{read:?}");
        assert_eq!(messages(&read), ["m0"]);
    }

    #[test]
    fn a_wrong_or_unparsable_length_costs_its_message_only() {
        for (declared, name) in [(-3, "short"), (3, "long"), (-40, "very short")] {
            let first = body(0);
            let length = first.len() as i64 + declared;
            let mut input = format!("Content-Length: {length}\r\n\r\n{first}").into_bytes();
            input.extend(frame(1));
            input.extend(frame(2));
            let read = read_all(&input);
            assert_eq!(messages(&read), ["m1", "m2"], "{name}: {read:?}");
            assert_eq!(read.len(), 3, "one error for {name}: {read:?}");
        }
        for value in ["12x", "", "-5", "+5", "0x10", "1 2"] {
            let mut input = format!("Content-Length: {value}\r\n\r\n{}", body(0)).into_bytes();
            input.extend(frame(1));
            let read = read_all(&input);
            assert_eq!(messages(&read), ["m1"], "`{value}`: {read:?}");
            assert_eq!(read.len(), 2, "`{value}`: {read:?}");
        }
        // A frame without any length, and a body that is not a message.
        let mut input = format!("Content-Type: x\r\n\r\n{}", body(0)).into_bytes();
        input.extend(b"Content-Length: 9\r\n\r\n{not json");
        input.extend(frame(1));
        assert_eq!(messages(&read_all(&input)), ["m1"]);
        // A length too long at the end of input: the frames it took are still read.
        let mut input = format!("Content-Length: 5000\r\n\r\n{}", body(0)).into_bytes();
        input.extend(frame(1));
        let read = read_all(&input);
        assert_eq!(messages(&read), ["m1"], "{read:?}");
    }

    #[test]
    fn bodies_nested_in_bad_bodies_are_replayed_within_a_budget() {
        // Each header claims the next 100,000 bytes, which hold all the headers after it:
        // replayed without end that is 20,000 bodies of 100 KB re-read (2 GB).
        let header = b"Content-Length: 100000\r\n\r\n";
        let mut input = header.repeat(20_000);
        input.extend(vec![b'x'; 100_000]);
        let mut reader = FrameReader::new(input.as_slice());
        reader.replay_budget = 1 << 20;
        let mut replayed = 0;
        while let Some(incoming) = reader.next() {
            assert!(matches!(incoming, Incoming::Malformed(_)));
            replayed = replayed.max(reader.replayed);
        }
        assert!(replayed <= 1 << 20, "{replayed}");
        // Within the budget, what a bad body took is still read: the frame after a header
        // that claims too much.
        let mut input = b"Content-Length: 100000\r\n\r\n".to_vec();
        input.extend(frame(0));
        assert_eq!(messages(&read_all(&input)), ["m0"]);
    }

    /// How a frame is damaged in a generated stream.
    #[derive(Debug, Clone)]
    enum Damage {
        None,
        /// Garbage before the frame (the frame itself is intact).
        Before(Vec<u8>),
        /// A length this much off (not zero).
        Length(i64),
        /// A length value that is no number, or one over the limit.
        Value(String),
        /// A malformed header line among the frame's headers.
        HeaderLine(Vec<u8>),
    }

    /// Pieces that make garbage look like frames.
    fn garbage() -> impl Strategy<Value = Vec<u8>> {
        let piece = prop_oneof![
            Just(b"Content-Length: ".to_vec()),
            Just(b"content-length:".to_vec()),
            Just(b"Content-Len".to_vec()),
            Just(b"\r\n".to_vec()),
            Just(b"\n".to_vec()),
            Just(b"{\"jsonrpc\":".to_vec()),
            Just(b"\xff\xfe".to_vec()),
            Just(b": ".to_vec()),
            (0u64..200).prop_map(|n| n.to_string().into_bytes()),
            Just(b"18446744073709551615".to_vec()),
            proptest::collection::vec(any::<u8>(), 0..12),
        ];
        proptest::collection::vec(piece, 0..8).prop_map(|pieces| pieces.concat())
    }

    fn damage() -> impl Strategy<Value = Damage> {
        prop_oneof![
            4 => Just(Damage::None),
            1 => garbage().prop_map(Damage::Before),
            1 => prop_oneof![-60i64..0, 1i64..400].prop_map(Damage::Length),
            1 => prop_oneof![
                Just("4611686018427387904".to_owned()),
                Just("100000000000".to_owned()),
                Just("99999999999999999999999".to_owned()),
                Just((MAX_FRAME_BYTES + 1).to_string()),
                Just(MAX_FRAME_BYTES.to_string()),
                "[ 0-9a-z+-]{0,6}",
            ]
            .prop_map(Damage::Value),
            1 => proptest::collection::vec(any::<u8>(), 0..20).prop_map(Damage::HeaderLine),
        ]
    }

    fn stream(damages: &[Damage]) -> Vec<u8> {
        let mut input = Vec::new();
        for (index, damage) in damages.iter().enumerate() {
            let body = body(index);
            let mut length = body.len().to_string();
            let mut extra = Vec::new();
            match damage {
                Damage::None => {}
                Damage::Before(garbage) => input.extend(garbage),
                Damage::Length(delta) => {
                    length = (body.len() as i64 + delta).max(0).to_string();
                }
                Damage::Value(value) => length.clone_from(value),
                Damage::HeaderLine(line) => {
                    extra = line.clone();
                    extra.extend(b"\r\n");
                }
            }
            input.extend(format!("Content-Length: {length}\r\n").bytes());
            input.extend(extra);
            input.extend(b"\r\n");
            input.extend(body.bytes());
        }
        input
    }

    fn cases() -> u32 {
        std::env::var("TORCHLINT_FUZZ_CASES")
            .ok()
            .and_then(|cases| cases.parse().ok())
            .unwrap_or(64)
    }

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(cases()))]

        /// Any bytes: no panic, the reader comes to the end, and a frame after them is read.
        #[test]
        fn any_bytes_are_read_to_the_end(bytes in proptest::collection::vec(any::<u8>(), 0..2000)) {
            let read = read_all(&bytes);
            prop_assert!(read.len() <= bytes.len());
            let mut input = bytes;
            input.extend(frame(0));
            let read = read_all(&input);
            prop_assert_eq!(messages(&read), ["m0"]);
        }

        /// Frames, some damaged: every intact frame is read, in order, whatever came before
        /// it; a damaged one costs at most its own message; nothing is read twice.
        #[test]
        fn intact_frames_survive_damaged_ones(
            damages in proptest::collection::vec(damage(), 1..10),
            tail in garbage(),
        ) {
            let mut input = stream(&damages);
            input.extend(tail);
            let read = read_all(&input);
            let indices: Vec<usize> = messages(&read)
                .iter()
                .map(|method| method.strip_prefix('m').and_then(|i| i.parse().ok()).expect("a generated frame"))
                .collect();
            prop_assert!(indices.windows(2).all(|pair| pair[0] < pair[1]), "{read:?}");
            for (index, damage) in damages.iter().enumerate() {
                if matches!(damage, Damage::None | Damage::Before(_)) {
                    prop_assert!(indices.contains(&index), "frame {index} lost: {damages:?} {read:?}");
                }
            }
        }
    }
}
