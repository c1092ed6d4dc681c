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
}

pub struct Outcome {
    pub events: Vec<Event>,
    pub stop: Stop,
    pub started: f64,
    pub duration: f64,
    /// How the interpreter process ended (None: it was killed by us).
    pub status: Option<ExitStatus>,
}

/// Set by the Ctrl-C handler; the run loop ends the script's process group when it sees it.
static INTERRUPTED: AtomicBool = AtomicBool::new(false);

impl Session<'_> {
    pub fn run(&self) -> Result<Outcome, String> {
        // The script runs in its own process group, so the terminal's Ctrl-C reaches only us:
        // we end the group ourselves and still print what was observed. The handler replaces
        // an inherited "ignore" (a background job of a shell without job control starts so):
        // an interrupt must end the script, not leave it running its course. A second session
        // in one process keeps the handler it has.
        let _ = ctrlc::set_handler(|| INTERRUPTED.store(true, Ordering::SeqCst));
        INTERRUPTED.store(false, Ordering::SeqCst);

        let (reader, writer) =
            std::io::pipe().map_err(|error| format!("cannot create the events pipe: {error}"))?;
        let mut command = Command::new(self.python);
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
        command
            .fd_mappings(vec![FdMapping {
                parent_fd: writer.into(),
                child_fd: EVENTS_FD,
            }])
            .map_err(|error| error.to_string())?;
        let started = now();
        let clock = Instant::now();
        let spawned = command.spawn();
        // The command holds our copy of the pipe's write end: drop it, so that the pipe ends
        // when the script's processes are gone.
        drop(command);
        let mut child = spawned.map_err(|error| {
            format!(
                "cannot run `{}`: {error} (choose the interpreter with --python)",
                self.python.display()
            )
        })?;
        let (sender, events) = mpsc::channel();
        let reader_thread = std::thread::spawn(move || {
            for line in BufReader::new(reader).lines() {
                let Ok(line) = line else { break };
                let event =
                    serde_json::from_str::<Event>(&line).unwrap_or_else(|error| Event::Error {
                        t: now(),
                        message: format!("unreadable event from the runner ({error}): {line}"),
                    });
                if sender.send(event).is_err() {
                    break;
                }
            }
        });

        let mut collected = Vec::new();
        let mut counts = vec![0u64; self.labels.len()];
        let mut armed: Option<Vec<usize>> = None;
        let mut progress = Progress::new(self.progress);
        let stop = loop {
            match events.recv_timeout(Duration::from_millis(100)) {
                Ok(event) => {
                    match &event {
                        Event::Start(start) => armed = Some(start.armed.clone()),
                        Event::Hit(hit) => {
                            if let Some(count) = counts.get_mut(hit.target) {
                                *count = (*count).max(hit.n);
                            }
                        }
                        _ => {}
                    }
                    let complete = matches!(event, Event::Complete { .. })
                        || armed.as_ref().is_some_and(|armed| {
                            !armed.is_empty()
                                && armed.iter().all(|&t| {
                                    counts
                                        .get(t)
                                        .zip(self.hits.get(t))
                                        .is_some_and(|(&count, &wanted)| count >= wanted)
                                })
                        });
                    collected.push(event);
                    // With `--until-exit` the script goes on, watched by the samples alone.
                    if complete && !self.until_exit {
                        break Stop::Complete;
                    }
                }
                Err(RecvTimeoutError::Timeout) => {}
                Err(RecvTimeoutError::Disconnected) => {
                    // Every process holding the pipe is gone: the script ended.
                    break Stop::ScriptExited;
                }
            }
            progress.show(&self.labels, &counts, &self.hits, clock.elapsed());
            if INTERRUPTED.load(Ordering::SeqCst) {
                break Stop::Interrupted;
            }
            if self.timeout.is_some_and(|limit| clock.elapsed() >= limit) {
                break Stop::Timeout;
            }
            if let Ok(Some(_)) = child.try_wait() {
                // The interpreter is gone; forked workers may still hold the pipe. Read what
                // is left for a moment, then end the rest of the group.
                collected.extend(drain(&events, Duration::from_millis(500)));
                break Stop::ScriptExited;
            }
        };
        progress.clear();
        let status = end_group(&mut child);
        collected.extend(drain(&events, Duration::from_millis(500)));
        drop(events);
        // The reader ends once every process holding the pipe is gone, which `end_group` made
        // sure of; don't wait on it if something outside the group inherited the pipe.
        if reader_thread.is_finished() {
            let _ = reader_thread.join();
        }
        Ok(Outcome {
            events: collected,
            stop,
            started,
            duration: clock.elapsed().as_secs_f64(),
            status,
        })
    }
}

fn drain(events: &mpsc::Receiver<Event>, within: Duration) -> Vec<Event> {
    let deadline = Instant::now() + within;
    let mut out = Vec::new();
    while let Some(left) = deadline.checked_duration_since(Instant::now()) {
        match events.recv_timeout(left) {
            Ok(event) => out.push(event),
            Err(_) => break,
        }
    }
    out
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

    fn show(&mut self, labels: &[String], counts: &[u64], hits: &[u64], elapsed: Duration) {
        if !self.enabled
            || self
                .last
                .is_some_and(|last| last.elapsed() < Duration::from_millis(250))
        {
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
