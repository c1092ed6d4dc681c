//! Runs the script under the runner, in a process group of its own, and collects what the
//! runner reports until the run is over: every watched line has its hits, the script ends, the
//! timeout passes, or the user presses Ctrl-C. However it ends, the whole group (DataLoader
//! workers included) is gone when `run` returns, so no GPU memory stays held.

use std::io::{BufRead, BufReader, IsTerminal, Write};
use std::os::fd::AsFd;
use std::os::unix::process::CommandExt;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, ExitStatus};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::mpsc::{self, RecvTimeoutError};
use std::time::{Duration, Instant};

use command_fds::{CommandFdExt, FdMapping};

use super::events::Event;
use super::now;
use super::report::Stop;

/// The descriptor the runner writes its events to, in the child.
pub const EVENTS_FD: i32 = 3;

pub struct Session<'a> {
    pub python: &'a Path,
    pub runner: &'a Path,
    pub plan: &'a Path,
    /// `CUDA_VISIBLE_DEVICES` for the script, when `--gpu` chose one.
    pub visible_devices: Option<String>,
    /// None: no limit.
    pub timeout: Option<Duration>,
    /// Keep the script running once every watched line has its hits (`--until-exit`).
    pub until_exit: bool,
    /// Hits wanted per target, and the targets' labels for the progress line.
    /// Hits wanted per watched line, in the order of `labels`.
    pub hits: Vec<u64>,
    pub labels: Vec<String>,
    pub progress: bool,
    /// Whether the script's stdout goes to our stderr (when ours carries a JSON report).
    pub script_stdout_to_stderr: bool,
    /// Run as a distributed job of this many ranks on this host (`--nproc-per-node`).
    pub distributed: Option<Distributed>,
}

/// A job launched through `torch.distributed.run`, its ranks' events sent to `socket`.
pub struct Distributed {
    /// The launcher and its options; the runner takes the training script's place.
    pub launcher: Vec<String>,
    /// The ranks this host runs, when known before they start (else each rank says).
    pub ranks: Option<usize>,
    pub socket: PathBuf,
}

pub struct Outcome {
    /// What each process sent: one channel for a script, one per rank for a distributed job.
    pub channels: Vec<Channel>,
    pub stop: Stop,
    pub started: f64,
    pub duration: f64,
    /// How the interpreter process ended (None: it was killed by us).
    pub status: Option<ExitStatus>,
}

/// Set by the Ctrl-C handler; the run loop ends the script's process group when it sees it.
static INTERRUPTED: AtomicBool = AtomicBool::new(false);

/// What one event channel (the script's process, or one rank of a distributed job) sent.
#[derive(Default)]
pub struct Channel {
    /// The rank the runner reported (`RANK`), for a distributed job.
    pub rank: Option<u32>,
    /// The interpreter's process id, from its start event.
    pub pid: Option<u32>,
    /// The ranks this host runs (`LOCAL_WORLD_SIZE`), as the rank reported it.
    local_world_size: Option<u32>,
    pub events: Vec<Event>,
    counts: Vec<u64>,
    armed: Option<Vec<usize>>,
    completed: bool,
}

impl Channel {
    fn new(targets: usize) -> Channel {
        Channel {
            counts: vec![0; targets],
            ..Channel::default()
        }
    }

    fn take(&mut self, event: Event) {
        match &event {
            Event::Start(start) => {
                self.armed = Some(start.armed.clone());
                self.rank = start.rank;
                self.local_world_size = start.local_world_size;
                self.pid = Some(start.pid);
            }
            Event::Hit(hit) => {
                if let Some(count) = self.counts.get_mut(hit.target) {
                    *count = (*count).max(hit.n);
                }
            }
            Event::Complete { .. } => self.completed = true,
            _ => {}
        }
        self.events.push(event);
    }

    /// Whether every watched line this process can reach has its hits.
    fn done(&self, wanted: &[u64]) -> bool {
        self.completed
            || self.armed.as_ref().is_some_and(|armed| {
                !armed.is_empty()
                    && armed.iter().all(|&t| {
                        self.counts
                            .get(t)
                            .zip(wanted.get(t))
                            .is_some_and(|(&count, &wanted)| count >= wanted)
                    })
            })
    }
}

/// What a reader thread hands the run loop.
enum Message {
    // Boxed: an event is large, and most messages are events anyway.
    Event(usize, Box<Event>),
    /// The channel's writers are all gone.
    Closed,
}

/// Reads one channel's events, one JSON object per line, until its writers are gone.
fn read_events(index: usize, reader: impl std::io::Read, sender: mpsc::Sender<Message>) {
    for line in BufReader::new(reader).lines() {
        let Ok(line) = line else { break };
        let event = serde_json::from_str::<Event>(&line).unwrap_or_else(|error| Event::Error {
            t: now(),
            message: format!("unreadable event from the runner ({error}): {line}"),
        });
        if sender.send(Message::Event(index, Box::new(event))).is_err() {
            return;
        }
    }
    let _ = sender.send(Message::Closed);
}

impl Session<'_> {
    pub fn run(&self) -> Result<Outcome, String> {
        // The script runs in its own process group, so the terminal's Ctrl-C reaches only us:
        // we end the group ourselves and still print what was observed. The handler replaces
        // an inherited "ignore" (a background job of a shell without job control starts so):
        // an interrupt must end the script, not leave it running its course. A second session
        // in one process keeps the handler it has.
        let _ = ctrlc::set_handler(|| INTERRUPTED.store(true, Ordering::SeqCst));
        INTERRUPTED.store(false, Ordering::SeqCst);

        let (sender, messages) = mpsc::channel();
        let mut command = match &self.distributed {
            Some(job) => {
                let mut command = Command::new(&job.launcher[0]);
                command.args(&job.launcher[1..]);
                command
            }
            None => Command::new(self.python),
        };
        // A distributed job: PyTorch's own launcher starts the ranks, each the runner; each
        // rank connects to the socket on its own (the launcher passes no descriptors on).
        let listener = match &self.distributed {
            Some(job) => {
                let listener = std::os::unix::net::UnixListener::bind(&job.socket)
                    .and_then(|listener| listener.set_nonblocking(true).map(|()| listener))
                    .map_err(|error| {
                        format!(
                            "cannot listen for the ranks' events at {}: {error}",
                            job.socket.display()
                        )
                    })?;
                Some(listener)
            }
            None => None,
        };
        command
            .arg(self.runner)
            .arg("--plan")
            .arg(self.plan)
            .process_group(0);
        if self.script_stdout_to_stderr {
            let stderr = std::io::stderr()
                .as_fd()
                .try_clone_to_owned()
                .map_err(|error| format!("cannot pass stderr to the script: {error}"))?;
            command.stdout(std::process::Stdio::from(stderr));
        }
        if let Some(devices) = &self.visible_devices {
            command.env("CUDA_VISIBLE_DEVICES", devices);
        }
        let pipe = if listener.is_none() {
            let (reader, writer) = std::io::pipe()
                .map_err(|error| format!("cannot create the events pipe: {error}"))?;
            command
                .fd_mappings(vec![FdMapping {
                    parent_fd: writer.into(),
                    child_fd: EVENTS_FD,
                }])
                .map_err(|error| error.to_string())?;
            Some(reader)
        } else {
            None
        };
        let started = now();
        let clock = Instant::now();
        let spawned = command.spawn();
        // The command holds our copy of the pipe's write end: drop it, so that the pipe ends
        // when the script's processes are gone.
        drop(command);
        let mut child = spawned.map_err(|error| match &self.distributed {
            Some(job) => format!("cannot run the launcher `{}`: {error}", job.launcher[0]),
            None => format!(
                "cannot run `{}`: {error} (choose the interpreter with --python)",
                self.python.display()
            ),
        })?;
        let accepting = std::sync::Arc::new(AtomicBool::new(true));
        let mut readers = Vec::new();
        if let Some(reader) = pipe {
            let sender = sender.clone();
            readers.push(std::thread::spawn(move || read_events(0, reader, sender)));
        }
        if let Some(listener) = listener {
            let (sender, accepting) = (sender.clone(), std::sync::Arc::clone(&accepting));
            readers.push(std::thread::spawn(move || {
                accept_ranks(&listener, &sender, &accepting);
            }));
        }
        drop(sender);
        // The ranks to wait for: as many as the job was given, else as many as the first rank
        // says this host runs (`LOCAL_WORLD_SIZE`).
        let known = match &self.distributed {
            Some(job) => job.ranks,
            None => Some(1),
        };

        let mut channels: Vec<Channel> = Vec::new();
        let mut closed = 0;
        let mut progress = Progress::new(self.progress);
        let stop = loop {
            match messages.recv_timeout(Duration::from_millis(100)) {
                Ok(Message::Event(index, event)) => {
                    while channels.len() <= index {
                        channels.push(Channel::new(self.labels.len()));
                    }
                    channels[index].take(*event);
                    // Every rank started and each has what it can reach.
                    let expected = expected_ranks(known, &channels);
                    let complete = channels.len() >= expected
                        && channels.iter().all(|channel| channel.done(&self.hits));
                    // With `--until-exit` the script goes on, watched by the samples alone.
                    if complete && !self.until_exit {
                        break Stop::Complete;
                    }
                }
                Ok(Message::Closed) => {
                    closed += 1;
                    // Every process holding a channel is gone: the script ended.
                    if closed >= expected_ranks(known, &channels) {
                        break Stop::ScriptExited;
                    }
                }
                Err(RecvTimeoutError::Timeout) => {}
                Err(RecvTimeoutError::Disconnected) => break Stop::ScriptExited,
            }
            if progress.due() {
                let counts = progress_counts(&channels, self.labels.len());
                progress.show(&self.labels, &counts, &self.hits, clock.elapsed());
            }
            if INTERRUPTED.load(Ordering::SeqCst) {
                break Stop::Interrupted;
            }
            if self.timeout.is_some_and(|limit| clock.elapsed() >= limit) {
                break Stop::Timeout;
            }
            if let Ok(Some(_)) = child.try_wait() {
                // The interpreter is gone; forked workers may still hold the pipe. Read what
                // is left for a moment, then end the rest of the group.
                drain(
                    &messages,
                    &mut channels,
                    &self.hits,
                    Duration::from_millis(500),
                );
                break Stop::ScriptExited;
            }
        };
        progress.clear();
        let status = end_group(&mut child);
        // A rank runs in a session of its own (the launcher starts each so): end each one's
        // group too, in case the launcher could not.
        if self.distributed.is_some() {
            for pid in channels.iter().filter_map(|channel| channel.pid) {
                signal_group(pid as libc::pid_t, libc::SIGKILL);
            }
        }
        accepting.store(false, Ordering::SeqCst);
        drain(
            &messages,
            &mut channels,
            &self.hits,
            Duration::from_millis(500),
        );
        drop(messages);
        // A reader ends once every process holding its channel is gone, which the above made
        // sure of; don't wait on one if something outside the group inherited the pipe.
        for reader in readers {
            if reader.is_finished() {
                let _ = reader.join();
            }
        }
        Ok(Outcome {
            channels,
            stop,
            started,
            duration: clock.elapsed().as_secs_f64(),
            status,
        })
    }
}

/// Accepts the ranks' connections until the run is over, a reader thread for each.
fn accept_ranks(
    listener: &std::os::unix::net::UnixListener,
    sender: &mpsc::Sender<Message>,
    accepting: &AtomicBool,
) {
    let mut index = 0;
    while accepting.load(Ordering::SeqCst) {
        match listener.accept() {
            Ok((stream, _)) => {
                // Blocking reads on the stream itself.
                let _ = stream.set_nonblocking(false);
                let sender = sender.clone();
                std::thread::spawn(move || read_events(index, stream, sender));
                index += 1;
            }
            Err(error) if error.kind() == std::io::ErrorKind::WouldBlock => {
                std::thread::sleep(Duration::from_millis(20));
            }
            Err(_) => break,
        }
    }
}

/// How many processes the run waits for: `known`, else the local world size a rank reported.
fn expected_ranks(known: Option<usize>, channels: &[Channel]) -> usize {
    known
        .or_else(|| {
            channels
                .iter()
                .find_map(|channel| channel.local_world_size)
                .map(|size| size as usize)
        })
        .unwrap_or(1)
        .max(1)
}

/// The progress line's count per watched line: the most any process has.
fn progress_counts(channels: &[Channel], targets: usize) -> Vec<u64> {
    (0..targets)
        .map(|target| {
            channels
                .iter()
                .filter_map(|channel| channel.counts.get(target).copied())
                .max()
                .unwrap_or(0)
        })
        .collect()
}

fn drain(
    messages: &mpsc::Receiver<Message>,
    channels: &mut Vec<Channel>,
    wanted: &[u64],
    within: Duration,
) {
    let deadline = Instant::now() + within;
    while let Some(left) = deadline.checked_duration_since(Instant::now()) {
        match messages.recv_timeout(left) {
            Ok(Message::Event(index, event)) => {
                while channels.len() <= index {
                    channels.push(Channel::new(wanted.len()));
                }
                channels[index].take(*event);
            }
            Ok(Message::Closed) => {}
            Err(_) => break,
        }
    }
}

/// Ends the script's process group: SIGTERM first (lets PyTorch and DataLoader workers exit),
/// SIGKILL for whatever is left after a grace period. Returns the interpreter's status when it
/// ended by itself before we had to stop it.
fn end_group(child: &mut Child) -> Option<ExitStatus> {
    let group = child.id() as libc::pid_t;
    if let Ok(Some(status)) = child.try_wait() {
        // The interpreter is gone; its workers are not always (they were forked into its group).
        signal_group(group, libc::SIGKILL);
        return Some(status);
    }
    signal_group(group, libc::SIGTERM);
    let deadline = Instant::now() + Duration::from_secs(3);
    while Instant::now() < deadline {
        if let Ok(Some(_)) = child.try_wait() {
            break;
        }
        std::thread::sleep(Duration::from_millis(20));
    }
    signal_group(group, libc::SIGKILL);
    let _ = child.wait();
    None
}

fn signal_group(group: libc::pid_t, signal: libc::c_int) {
    // SAFETY: killpg only sends a signal; the group is the one we created for the script
    // (its id is the interpreter's pid, which stays reserved until we reap it).
    unsafe {
        libc::killpg(group, signal);
    }
}

/// A one-line status on stderr (only on a terminal): hits per watched line, elapsed time.
struct Progress {
    enabled: bool,
    last: Option<Instant>,
    shown: bool,
}

impl Progress {
    fn new(wanted: bool) -> Progress {
        Progress {
            enabled: wanted && std::io::stderr().is_terminal(),
            last: None,
            shown: false,
        }
    }

    /// Whether the line is shown and due for a refresh: the counts are gathered only then.
    fn due(&self) -> bool {
        self.enabled
            && self
                .last
                .is_none_or(|last| last.elapsed() >= Duration::from_millis(250))
    }

    fn show(&mut self, labels: &[String], counts: &[u64], hits: &[u64], elapsed: Duration) {
        if !self.due() {
            return;
        }
        self.last = Some(Instant::now());
        let parts: Vec<String> = labels
            .iter()
            .zip(counts)
            .zip(hits)
            .map(|((label, count), hits)| format!("{label} {}/{hits}", count.min(hits)))
            .collect();
        let mut line = format!(
            "probe {:>5.1}s  {}",
            elapsed.as_secs_f64(),
            parts.join("  ")
        );
        line.truncate(160);
        let mut stderr = std::io::stderr().lock();
        let _ = write!(stderr, "\r\x1b[2K{line}");
        let _ = stderr.flush();
        self.shown = true;
    }

    fn clear(&mut self) {
        if self.shown {
            let mut stderr = std::io::stderr().lock();
            let _ = write!(stderr, "\r\x1b[2K");
            let _ = stderr.flush();
        }
    }
}

/// The interpreter to run: `--python`, else the active virtual environment's, else `python3`.
pub fn default_python() -> PathBuf {
    if let Some(venv) = std::env::var_os("VIRTUAL_ENV") {
        let python = Path::new(&venv).join("bin").join("python");
        if python.exists() {
            return python;
        }
    }
    PathBuf::from("python3")
}
