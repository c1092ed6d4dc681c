//! Hostile input as property tests: real files mutated (truncated, spliced, re-encoded, nested
//! deep, given huge lines), notebooks and configs likewise. Whatever comes in, linting never
//! panics, never takes a rule down, ends in bounded time, and every output format stays valid.
//!
//! `cargo test` runs a few cases of each; `scripts/fuzz --minutes 60` runs these same targets
//! for a campaign (`TORCHLINT_FUZZ_CASES` sets the cases per run, and each run draws new ones).

use std::path::{Path, PathBuf};
use std::sync::{Arc, LazyLock};
use std::time::{Duration, Instant};

use proptest::prelude::*;
use proptest::test_runner::{Config, RngSeed};

use torchlint::diagnostic::FileDiagnostics;
use torchlint::project::run::{self, Outcome};
use torchlint::render::{self, OutputFormat, Report};
use torchlint::settings::config_file;
use torchlint::settings::{CliOverrides, Settings};

/// The longest one case of `len` bytes may take to lint, or to render in one format, far
/// above what any case needs: past it, something is quadratic or stuck. Parsing alone may take
/// its budget (tree-sitter's scanner is quadratic on backslash continuations, which the
/// budget bounds), so a large case gets three times that, in wall time on a loaded machine. A
/// campaign hunting slow paths sets a lower, fixed one (`TORCHLINT_FUZZ_CASE_MS`).
fn case_time_limit(len: usize) -> Duration {
    static FIXED: LazyLock<Option<Duration>> = LazyLock::new(|| {
        std::env::var("TORCHLINT_FUZZ_CASE_MS")
            .ok()
            .and_then(|ms| ms.parse().ok())
            .map(Duration::from_millis)
    });
    FIXED.unwrap_or_else(|| Duration::from_secs(30).max(torchlint::parse::parse_budget(len) * 3))
}

fn config() -> Config {
    // A failing input is kept in proptest-regressions/fuzz.txt: later runs try it first.
    match std::env::var("TORCHLINT_FUZZ_CASES")
        .ok()
        .and_then(|c| c.parse().ok())
    {
        // A campaign: fresh random cases each run, and a failure shrunk for at most ten minutes.
        Some(cases) => Config {
            max_shrink_time: 600_000,
            ..Config::with_cases(cases)
        },
        // `cargo test`: the same few cases every run, so a test run never fails on a draw the
        // previous one did not make; campaigns find the new ones.
        None => Config {
            rng_seed: RngSeed::Fixed(0x7091_1ec7),
            ..Config::with_cases(24)
        },
    }
}

// ---------------------------------------------------------------------------------------------
// Seeds: real Python and notebooks from this repository (the rule docs' examples hold every
// hazard the rules know).

/// The checkout the seeds come from: where the tests were built, or, for a test executable
/// copied to another machine (`scripts/fuzz --binaries`), the folder it runs in.
fn repository() -> &'static Path {
    static REPOSITORY: LazyLock<PathBuf> = LazyLock::new(|| {
        let built = PathBuf::from(env!("CARGO_MANIFEST_DIR"));
        match std::env::current_dir() {
            Ok(here) if !built.join("rules").is_dir() && here.join("rules").is_dir() => here,
            _ => built,
        }
    });
    &REPOSITORY
}

static PYTHON_SEEDS: LazyLock<Vec<Vec<u8>>> = LazyLock::new(|| {
    let mut seeds = Vec::new();
    for file in files_under(&repository().join("rules"), "md") {
        let text = std::fs::read_to_string(file).unwrap();
        for block in text.split("```python").skip(1) {
            if let Some((code, _)) = block.split_once("```") {
                seeds.push(code.trim_start_matches('\n').as_bytes().to_vec());
            }
        }
    }
    for folder in ["examples", "tests/fixtures/formats"] {
        for file in files_under(&repository().join(folder), "py") {
            seeds.push(std::fs::read(file).unwrap());
        }
    }
    assert!(seeds.len() > 20, "too few seeds: {}", seeds.len());
    seeds
});

static NOTEBOOK_SEEDS: LazyLock<Vec<Vec<u8>>> = LazyLock::new(|| {
    files_under(&repository().join("tests/fixtures/notebooks"), "ipynb")
        .into_iter()
        .map(|file| std::fs::read(file).unwrap())
        .collect()
});

const CONFIG_SEEDS: &[&str] = &[
    "select = [\"TL\"]\nextend-select = [\"TL2\"]\nignore = [\"TL201\"]\nextend-exclude = [\"legacy\", \"*_generated.py\"]\n",
    "[per-file-ignores]\n\"tests/*\" = [\"TL108\"]\n\n[empty-cache-in-loop]\nextra-functions = [\"myproject.utils.free_gpu_memory\"]\n",
    "[frameworks]\nmodel-factories = [\"acme.zoo.build_*\"]\nmodule-bases = [\"acme.train.Task\"]\nbackward-methods = [\"backprop\"]\n",
    "select = [\"ALL\"]\nexclude = [\"build\"]\n[pinned-workers]\n",
];

fn files_under(folder: &Path, extension: &str) -> Vec<PathBuf> {
    let mut files = Vec::new();
    let mut folders = vec![folder.to_owned()];
    while let Some(folder) = folders.pop() {
        for entry in std::fs::read_dir(&folder).unwrap() {
            let path = entry.unwrap().path();
            if path.is_dir() {
                folders.push(path);
            } else if path.extension().is_some_and(|e| e == extension) {
                files.push(path);
            }
        }
    }
    files.sort();
    files
}

// ---------------------------------------------------------------------------------------------
// Mutations: what the robustness campaign did to real files.

#[derive(Debug, Clone)]
enum Mutation {
    /// Cut the file at this fraction of its length (mid-token, mid-character).
    Truncate(f64),
    /// Put a slice of another seed at this point.
    Splice {
        seed: usize,
        from: f64,
        length: usize,
        at: f64,
    },
    /// Insert these bytes.
    Insert { at: f64, bytes: Vec<u8> },
    /// Repeat a region many times.
    Repeat {
        at: f64,
        length: usize,
        times: usize,
    },
    /// Wrap a region in deep brackets, or indent it deep.
    Nest { at: f64, depth: usize, kind: u8 },
    /// A huge line: one token repeated.
    HugeLine { at: f64, unit: u8, times: usize },
    /// Line endings: CR only, or CRLF.
    LineEndings { cr_only: bool },
    /// Re-encode: Latin-1 with a coding line, UTF-16, a BOM, or a coding line that lies.
    Encoding(u8),
    /// Flip one byte.
    Flip { at: f64, byte: u8 },
}

fn mutation(seeds: usize) -> impl Strategy<Value = Mutation> {
    let at = 0.0..=1.0f64;
    prop_oneof![
        3 => at.clone().prop_map(Mutation::Truncate),
        3 => (0..seeds, at.clone(), 1..400usize, at.clone())
            .prop_map(|(seed, from, length, at)| Mutation::Splice { seed, from, length, at }),
        3 => (at.clone(), proptest::collection::vec(any::<u8>(), 1..16))
            .prop_map(|(at, bytes)| Mutation::Insert { at, bytes }),
        2 => (at.clone(), 1..80usize, 2..2_000usize)
            .prop_map(|(at, length, times)| Mutation::Repeat { at, length, times }),
        2 => (at.clone(), 1..3_000usize, 0..4u8)
            .prop_map(|(at, depth, kind)| Mutation::Nest { at, depth, kind }),
        1 => (at.clone(), 0..6u8, 1..200_000usize)
            .prop_map(|(at, unit, times)| Mutation::HugeLine { at, unit, times }),
        1 => any::<bool>().prop_map(|cr_only| Mutation::LineEndings { cr_only }),
        1 => (0..4u8).prop_map(Mutation::Encoding),
        3 => (at, any::<u8>()).prop_map(|(at, byte)| Mutation::Flip { at, byte }),
    ]
}

/// Pieces of training code, for inputs that decode and parse in part but in no order a person
/// would write: they reach the rules, where random bytes stop at the decoder.
const TOKENS: &[&str] = &[
    "\n",
    "\n",
    "\n",
    "    ",
    "    ",
    "\t",
    "\\\n",
    "\r",
    ":",
    "(",
    ")",
    "[",
    "]",
    "{",
    "}",
    ",",
    ".",
    "=",
    "+=",
    "-",
    "*",
    "**",
    "@",
    "->",
    "#",
    "\"",
    "'''",
    "f\"{",
    "for ",
    " in ",
    "while ",
    "if ",
    "else",
    "def ",
    "class ",
    "return ",
    "yield ",
    "with ",
    "async ",
    "await ",
    "lambda ",
    "global ",
    "del ",
    "try",
    "except ",
    "import torch",
    "from torch import load as L",
    "x",
    "model",
    "self",
    "self.state",
    "loss",
    "total_loss",
    "losses",
    "outputs",
    "batch",
    "loader",
    "device",
    "optimizer",
    "torch",
    "torch.load(p)",
    "torch.no_grad()",
    "torch.cuda.empty_cache()",
    "model.eval()",
    "model.train()",
    ".backward()",
    ".backward(retain_graph=True)",
    ".detach()",
    ".item()",
    ".cpu()",
    ".to(device)",
    ".cuda()",
    ".append(",
    ".numpy()",
    "np.float64",
    "torch.from_numpy(",
    "DataLoader(ds, num_workers=8, pin_memory=True)",
    ".register_forward_hook(",
    "torch.autograd.set_detect_anomaly(True)",
    "optimizer.step()",
    "model(batch)",
    "criterion(outputs, y)",
    "0",
    "1.5",
    "None",
    "True",
];

fn token() -> impl Strategy<Value = &'static str> {
    proptest::sample::select(TOKENS)
}

fn point(bytes: &[u8], at: f64) -> usize {
    ((bytes.len() as f64 * at) as usize).min(bytes.len())
}

fn apply(mut bytes: Vec<u8>, mutation: &Mutation, seeds: &[Vec<u8>]) -> Vec<u8> {
    match *mutation {
        Mutation::Truncate(at) => bytes.truncate(point(&bytes, at)),
        Mutation::Splice {
            seed,
            from,
            length,
            at,
        } => {
            let other = &seeds[seed];
            let start = point(other, from);
            let end = (start + length).min(other.len());
            let at = point(&bytes, at);
            bytes.splice(at..at, other[start..end].iter().copied());
        }
        Mutation::Insert {
            at,
            bytes: ref inserted,
        } => {
            let at = point(&bytes, at);
            bytes.splice(at..at, inserted.iter().copied());
        }
        Mutation::Repeat { at, length, times } => {
            let start = point(&bytes, at);
            let end = (start + length).min(bytes.len());
            let region = bytes[start..end].repeat(times);
            bytes.splice(start..start, region);
        }
        Mutation::Nest { at, depth, kind } => {
            let at = point(&bytes, at);
            let (open, close): (&[u8], &[u8]) = match kind {
                0 => (b"(", b")"),
                1 => (b"[", b"]"),
                2 => (b"{", b"}"),
                _ => (b" ", b""),
            };
            let mut nested = open.repeat(depth);
            nested.extend_from_slice(b"torch.load(p)");
            nested.extend_from_slice(&close.repeat(depth));
            bytes.splice(at..at, nested);
        }
        Mutation::HugeLine { at, unit, times } => {
            let unit: &[u8] = match unit {
                0 => b"a+",
                1 => b"a,",
                2 => b"x = 1 \\\n",
                3 => b"\"s\" ",
                4 => b"[a]",
                _ => b"# comment ",
            };
            let at = point(&bytes, at);
            let mut line = unit.repeat(times);
            line.extend_from_slice(b"a\n");
            bytes.splice(at..at, line);
        }
        Mutation::LineEndings { cr_only } => {
            let text: Vec<u8> = bytes.iter().copied().filter(|&b| b != b'\r').collect();
            bytes = Vec::with_capacity(text.len() * 2);
            for byte in text {
                match byte {
                    b'\n' if cr_only => bytes.push(b'\r'),
                    b'\n' => bytes.extend_from_slice(b"\r\n"),
                    byte => bytes.push(byte),
                }
            }
        }
        Mutation::Encoding(kind) => {
            let text = String::from_utf8_lossy(&bytes).into_owned();
            bytes = match kind {
                0 => {
                    let mut latin1 = b"# -*- coding: latin-1 -*-\n".to_vec();
                    latin1.extend(text.chars().map(|c| u8::try_from(c).unwrap_or(b'?')));
                    latin1
                }
                1 => {
                    let mut utf16 = vec![0xFF, 0xFE];
                    utf16.extend(text.encode_utf16().flat_map(u16::to_le_bytes));
                    utf16
                }
                2 => [b"\xEF\xBB\xBF".as_slice(), text.as_bytes()].concat(),
                _ => [b"# coding: shift_jis\n".as_slice(), text.as_bytes()].concat(),
            };
        }
        Mutation::Flip { at, byte } => {
            let at = point(&bytes, at);
            if at < bytes.len() {
                bytes[at] = byte;
            }
        }
    }
    bytes
}

fn mutated(seeds: &'static [Vec<u8>], most: usize) -> impl Strategy<Value = Vec<u8>> {
    (
        0..seeds.len(),
        proptest::collection::vec(mutation(seeds.len()), 0..most),
    )
        .prop_map(move |(seed, mutations)| {
            mutations
                .iter()
                .fold(seeds[seed].clone(), |bytes, m| apply(bytes, m, seeds))
        })
}

// ---------------------------------------------------------------------------------------------
// What must hold for every input.

static SETTINGS: LazyLock<Settings> = LazyLock::new(|| {
    let every_rule = CliOverrides {
        select: Some(vec!["ALL".to_owned()]),
        ..CliOverrides::default()
    };
    Settings::defaults(repository(), &every_rule).unwrap()
});

const FORMATS: [OutputFormat; 10] = [
    OutputFormat::Full,
    OutputFormat::Concise,
    OutputFormat::Json,
    OutputFormat::JsonLines,
    OutputFormat::Sarif,
    OutputFormat::Github,
    OutputFormat::Gitlab,
    OutputFormat::Junit,
    OutputFormat::Pylint,
    OutputFormat::Rdjson,
];

/// Lints one file's bytes alone and checks the outcome and every format's output.
fn lint_and_render(name: &str, bytes: &[u8]) -> Result<(), TestCaseError> {
    let started = Instant::now();
    let outcome = run::lint_alone(Path::new(name), bytes, &SETTINGS, false);
    let took = started.elapsed();
    prop_assert!(
        took < case_time_limit(bytes.len()),
        "linting {} bytes took {took:?}",
        bytes.len()
    );
    let file = match outcome {
        Outcome::Linted {
            file,
            internal_errors,
        } => {
            prop_assert!(
                internal_errors.is_empty(),
                "a rule failed: {:?}",
                internal_errors
                    .iter()
                    .map(|e| format!("{}: {}", e.rule.code, e.message))
                    .collect::<Vec<_>>()
            );
            file
        }
        Outcome::Failed(error) => {
            // A file torchlint cannot read is one clear message naming it.
            prop_assert_eq!(error.path, PathBuf::from(name));
            prop_assert!(!error.message.is_empty());
            return Ok(());
        }
        Outcome::Clean | Outcome::Parsed => return Ok(()),
    };
    check_formats(file)
}

fn check_formats(file: FileDiagnostics) -> Result<(), TestCaseError> {
    let rules: Vec<Arc<_>> = SETTINGS.enabled_rules().to_vec();
    let files = [file];
    let report = Report {
        files: &files,
        rules: &rules,
        fixes: torchlint::fix::Allowed::Safe,
    };
    let findings = report.count();
    for format in FORMATS {
        let mut out = Vec::new();
        let started = Instant::now();
        render::render(format, &report, false, &mut out)
            .map_err(|error| TestCaseError::fail(format!("{format:?}: {error}")))?;
        let took = started.elapsed();
        prop_assert!(
            took < case_time_limit(0),
            "{format:?} of {findings} findings took {took:?}"
        );
        let text = String::from_utf8(out)
            .map_err(|_| TestCaseError::fail(format!("{format:?}: not UTF-8")))?;
        match format {
            OutputFormat::Json
            | OutputFormat::Sarif
            | OutputFormat::Gitlab
            | OutputFormat::Rdjson => {
                let value: Result<serde_json::Value, _> = serde_json::from_str(&text);
                prop_assert!(value.is_ok(), "{format:?} is not JSON: {text}");
            }
            OutputFormat::JsonLines => {
                prop_assert_eq!(text.lines().count(), findings, "{:?}:\n{}", format, text);
                for line in text.lines() {
                    let value: Result<serde_json::Value, _> = serde_json::from_str(line);
                    prop_assert!(value.is_ok(), "a JSON line is not JSON: {line}");
                }
            }
            OutputFormat::Concise | OutputFormat::Github | OutputFormat::Pylint => {
                // One line per finding: what line-oriented CI tools rely on.
                prop_assert_eq!(text.lines().count(), findings, "{:?}:\n{}", format, text);
            }
            OutputFormat::Junit => {
                let parsed = roxmltree::Document::parse(&text);
                prop_assert!(
                    parsed.is_ok(),
                    "JUnit is not XML ({:?}):\n{}",
                    parsed.err(),
                    text
                );
            }
            OutputFormat::Full => {}
        }
    }
    Ok(())
}

proptest! {
    #![proptest_config(config())]

    #[test]
    fn python_of_any_shape_lints_cleanly(bytes in mutated(&PYTHON_SEEDS, 6)) {
        lint_and_render("fuzzed.py", &bytes)?;
    }

    #[test]
    fn arbitrary_bytes_lint_cleanly(bytes in proptest::collection::vec(any::<u8>(), 0..4096)) {
        lint_and_render("bytes.py", &bytes)?;
    }

    #[test]
    fn python_tokens_in_any_order_lint_cleanly(tokens in proptest::collection::vec(token(), 0..400)) {
        lint_and_render("tokens.py", tokens.concat().as_bytes())?;
    }

    #[test]
    fn notebooks_of_any_shape_lint_cleanly(bytes in mutated(&NOTEBOOK_SEEDS, 4)) {
        lint_and_render("fuzzed.ipynb", &bytes)?;
    }

    #[test]
    fn python_wrapped_in_notebooks_lints_cleanly(bytes in mutated(&PYTHON_SEEDS, 4)) {
        let source = String::from_utf8_lossy(&bytes);
        let notebook = serde_json::json!({
            "nbformat": 4, "nbformat_minor": 5, "metadata": {},
            "cells": [{"cell_type": "code", "metadata": {}, "outputs": [], "source": source}],
        });
        lint_and_render("wrapped.ipynb", notebook.to_string().as_bytes())?;
    }

    #[test]
    fn configs_of_any_shape_load_or_say_why(
        seed in 0..CONFIG_SEEDS.len(),
        mutations in proptest::collection::vec(mutation(CONFIG_SEEDS.len()), 0..4),
    ) {
        let seeds: Vec<Vec<u8>> = CONFIG_SEEDS.iter().map(|s| s.as_bytes().to_vec()).collect();
        let text = mutations
            .iter()
            .fold(seeds[seed].clone(), |bytes, m| apply(bytes, m, &seeds));
        let folder = tempfile::tempdir().unwrap();
        let path = folder.path().join("torchlint.toml");
        std::fs::write(&path, &text).unwrap();
        match config_file::read(&path) {
            Ok(Some(config)) => {
                if let Err(error) = Settings::from_config(&config, &CliOverrides::default()) {
                    prop_assert_eq!(error.path, path);
                }
            }
            Ok(None) => {}
            Err(error) => {
                prop_assert_eq!(&error.path, &path);
                prop_assert!(!error.message.is_empty());
            }
        }
    }
}
