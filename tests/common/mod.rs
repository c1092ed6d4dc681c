//! Helpers for the integration tests: a throwaway project folder and the real binary.

#![allow(dead_code)]

pub mod lsp;

use std::fs;
use std::io::Write;
use std::path::{Path, PathBuf};
use std::process::{Command, Output, Stdio};

/// A temporary project folder the binary runs in.
pub struct Project {
    dir: tempfile::TempDir,
}

impl Project {
    pub fn new() -> Self {
        Project {
            dir: tempfile::tempdir().expect("a temporary folder"),
        }
    }

    pub fn path(&self) -> &Path {
        self.dir.path()
    }

    /// Writes a file (creating folders); returns its path.
    pub fn write(&self, relative: &str, contents: impl AsRef<[u8]>) -> PathBuf {
        let path = self.dir.path().join(relative);
        if let Some(parent) = path.parent() {
            fs::create_dir_all(parent).expect("create folders");
        }
        fs::write(&path, contents).expect("write file");
        path
    }

    /// A `torchlint` command running in the project folder, with color and env overrides off.
    pub fn command(&self) -> Command {
        let mut command = Command::new(env!("CARGO_BIN_EXE_torchlint"));
        command
            .current_dir(self.dir.path())
            .env_remove("TORCHLINT_INJECT_PANIC")
            .env("NO_COLOR", "1");
        command
    }

    pub fn run(&self, args: &[&str]) -> Run {
        Run::from(self.command().args(args).output().expect("run torchlint"))
    }

    pub fn run_with_stdin(&self, args: &[&str], stdin: &str) -> Run {
        let mut child = self
            .command()
            .args(args)
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .expect("spawn torchlint");
        child
            .stdin
            .take()
            .unwrap()
            .write_all(stdin.as_bytes())
            .unwrap();
        Run::from(child.wait_with_output().expect("wait for torchlint"))
    }
}

/// What one run of the binary printed, and its exit code.
#[derive(Debug)]
pub struct Run {
    pub code: i32,
    pub stdout: String,
    pub stderr: String,
}

impl From<Output> for Run {
    fn from(output: Output) -> Self {
        Run {
            code: output.status.code().unwrap_or(-1),
            stdout: String::from_utf8_lossy(&output.stdout).into_owned(),
            stderr: String::from_utf8_lossy(&output.stderr).into_owned(),
        }
    }
}

impl Run {
    /// The `path:line:col: CODE` prefixes of concise output, one per finding.
    pub fn findings(&self) -> Vec<String> {
        self.stdout
            .lines()
            .filter_map(|line| {
                let (location, rest) = line.split_once(": ")?;
                let code = rest.split(' ').next()?;
                is_code(code).then(|| format!("{location}: {code}"))
            })
            .collect()
    }
}

fn is_code(text: &str) -> bool {
    let letters = text.chars().take_while(|c| c.is_ascii_uppercase()).count();
    letters > 0 && letters < text.len() && text[letters..].chars().all(|c| c.is_ascii_digit())
}

/// Says a test was skipped, and why, where `cargo test` shows it: libtest captures the print
/// macros of passing tests, but not writes to the stderr handle itself.
pub fn report_skip(test: &str, why: &str) {
    use std::io::Write as _;
    let _ = writeln!(std::io::stderr(), "skipped {test}: {why}");
}

/// An evaluation loop with grad on that keeps every batch's graph: TL101 at 10:22 (the
/// forward) and TL102 at 11:5 (`total += loss`). The editor tests' fixture.
pub const EVAL_HAZARD: &str = "\
import torch
from torch import nn

model = nn.Linear(8, 1)
criterion = nn.MSELoss()
model.eval()
total = 0
for step in range(10):
    x = torch.randn(4, 8)
    loss = criterion(model(x), torch.randn(4, 1))
    total += loss
";

/// An evaluation helper with a TL101 finding (7:21) that holds only if a caller runs it with
/// grad enabled.
pub const EVAL_HELPER: &str = "\
import torch

def evaluate(model, loader):
    model.eval()
    correct = 0
    for x, y in loader:
        correct += (model(x.cuda()).argmax(1) == y.cuda()).sum().item()
    return correct
";
