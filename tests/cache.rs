//! The result cache: a second run reads unchanged files' findings from `.torchlint_cache`;
//! anything a finding depends on — the file, another file of the project, the config, the
//! torchlint build — invalidates it, and a damaged cache heals itself.
//!
//! Hits are made visible by editing a cached message: a run that prints the edited message
//! read the cache, one that prints the real message linted the file.

mod common;

use std::fs;
use std::path::PathBuf;
use std::time::Duration;

use common::{EVAL_HAZARD, Project};

const REAL: &str = "`total` accumulates `loss`";
// As long as `REAL`: the cache file is binary, with each string's length before it.
const EDITED: &str = "MESSAGE FROM THE CACHE ***";

fn results(project: &Project) -> PathBuf {
    project
        .path()
        .join(".torchlint_cache")
        .join(env!("CARGO_PKG_VERSION"))
        .join("results.postcard")
}

/// `bytes` with every `from` replaced by `to`, of the same length (so the binary cache stays
/// readable).
fn replace_bytes(bytes: &[u8], from: &str, to: &str) -> Vec<u8> {
    assert_eq!(from.len(), to.len());
    let mut out = bytes.to_vec();
    let mut at = 0;
    while let Some(found) = out[at..]
        .windows(from.len())
        .position(|window| window == from.as_bytes())
    {
        out[at + found..at + found + from.len()].copy_from_slice(to.as_bytes());
        at += found + from.len();
    }
    out
}

/// Rewrites the cached messages of TL102, so that a cache hit shows. The run records go: a
/// record replays the report as it was before the rewrite (or the damage a test does).
fn mark_cache(project: &Project) {
    forget_records(project);
    let path = results(project);
    let bytes = fs::read(&path).expect("a cache file");
    let marked = replace_bytes(&bytes, REAL, EDITED);
    assert_ne!(marked, bytes, "the cache holds the finding");
    fs::write(path, marked).unwrap();
}

fn check(project: &Project, extra: &[&str]) -> common::Run {
    let mut args = vec!["check", "--output-format", "concise"];
    args.extend_from_slice(extra);
    project.run(&args)
}

#[test]
fn an_unchanged_file_is_read_from_the_cache() {
    let project = Project::new();
    project.write("eval.py", EVAL_HAZARD);
    let cold = check(&project, &[]);
    assert_eq!(cold.code, 1);
    assert!(cold.stdout.contains(REAL));

    let cache = project.path().join(".torchlint_cache");
    assert!(
        fs::read_to_string(cache.join("CACHEDIR.TAG"))
            .unwrap()
            .starts_with("Signature: 8a477f597d28d172789f06886806bc55")
    );
    assert_eq!(
        fs::read_to_string(cache.join(".gitignore")).unwrap(),
        "# Created by torchlint.\n*\n"
    );

    mark_cache(&project);
    let warm = check(&project, &[]);
    assert!(warm.stdout.contains(EDITED), "{warm:#?}");
    assert_eq!(warm.findings(), cold.findings());
    assert_eq!(warm.code, 1);
}

#[test]
fn no_cache_neither_reads_nor_writes() {
    let project = Project::new();
    project.write("eval.py", EVAL_HAZARD);
    check(&project, &["--no-cache"]);
    assert!(!project.path().join(".torchlint_cache").exists());

    check(&project, &[]);
    mark_cache(&project);
    let run = check(&project, &["--no-cache"]);
    assert!(run.stdout.contains(REAL), "{run:#?}");
}

#[test]
fn a_changed_file_is_linted_again() {
    let project = Project::new();
    project.write("eval.py", EVAL_HAZARD);
    check(&project, &[]);
    mark_cache(&project);
    project.write("eval.py", format!("# edited\n{EVAL_HAZARD}"));
    let run = check(&project, &[]);
    assert!(run.stdout.contains(REAL), "{run:#?}");
    assert_eq!(
        run.findings(),
        ["eval.py:11:22: TL101", "eval.py:12:5: TL102"]
    );
}

#[test]
fn a_changed_config_or_selection_is_linted_again() {
    let project = Project::new();
    project.write("eval.py", EVAL_HAZARD);
    check(&project, &[]);
    mark_cache(&project);
    let run = check(&project, &["--ignore", "TL101"]);
    assert_eq!(run.findings(), ["eval.py:11:5: TL102"]);
    assert!(run.stdout.contains(REAL), "{run:#?}");

    check(&project, &[]);
    mark_cache(&project);
    project.write("torchlint.toml", "ignore = [\"TL101\"]\n");
    let run = check(&project, &[]);
    assert_eq!(run.findings(), ["eval.py:11:5: TL102"]);
    assert!(run.stdout.contains(REAL), "{run:#?}");
}

#[test]
fn a_change_in_a_caller_re_decides_a_cached_finding() {
    // `evaluate` in metrics.py is flagged only if some caller runs it with grad on: metrics.py
    // never changes, but its finding follows train.py.
    let project = Project::new();
    project.write(
        "metrics.py",
        "import torch\n\ndef evaluate(model, loader):\n    model.eval()\n    correct = 0\n    for x, y in loader:\n        correct += (model(x.cuda()).argmax(1) == y.cuda()).sum().item()\n    return correct\n",
    );
    let no_grad_caller = "import torch\nfrom metrics import evaluate\n\ndef fit(model, loader):\n    with torch.no_grad():\n        return evaluate(model, loader)\n";
    let grad_caller = "from metrics import evaluate\n\ndef fit(model, loader):\n    return evaluate(model, loader)\n";
    let tl101 = |project: &Project| check(project, &["--select", "TL101"]).findings();

    project.write("train.py", no_grad_caller);
    assert_eq!(tl101(&project), Vec::<String>::new());
    assert_eq!(tl101(&project), Vec::<String>::new());
    project.write("train.py", grad_caller);
    assert_eq!(tl101(&project), ["metrics.py:7:21: TL101"]);
    assert_eq!(tl101(&project), ["metrics.py:7:21: TL101"]);
    project.write("train.py", no_grad_caller);
    assert_eq!(tl101(&project), Vec::<String>::new());
}

#[test]
fn a_corrupt_or_foreign_cache_is_replaced() {
    let project = Project::new();
    project.write("eval.py", EVAL_HAZARD);
    let expected = check(&project, &[]).stdout;

    for damage in [
        b"\x00\xffnot a cache at all".to_vec(),
        b"{\"build\": \"0.0.1 other\", \"files\": {}}".to_vec(),
        vec![0xff; 64],
        Vec::new(),
    ] {
        fs::write(results(&project), damage).unwrap();
        forget_records(&project);
        let run = check(&project, &[]);
        assert_eq!(run.stdout, expected);
        assert_eq!(run.stderr, "");
        // Valid again, and holding the file: the next run reads its finding from it.
        mark_cache(&project);
        assert!(check(&project, &[]).stdout.contains(EDITED));
    }

    // A cache from another build of torchlint holds stale findings: it is not read.
    fs::remove_file(results(&project)).unwrap();
    forget_records(&project);
    check(&project, &[]);
    mark_cache(&project);
    let bytes = fs::read(results(&project)).unwrap();
    let version = env!("CARGO_PKG_VERSION");
    let other = "9".repeat(version.len());
    fs::write(results(&project), replace_bytes(&bytes, version, &other)).unwrap();
    forget_records(&project);
    let run = check(&project, &[]);
    assert!(run.stdout.contains(REAL), "{run:#?}");
}

#[test]
fn concurrent_runs_leave_a_valid_cache() {
    let project = Project::new();
    for i in 0..20 {
        project.write(&format!("m{i}.py"), EVAL_HAZARD);
    }
    let children: Vec<_> = (0..6)
        .map(|_| {
            project
                .command()
                .args(["check", "--output-format", "concise", "."])
                .stdout(std::process::Stdio::piped())
                .stderr(std::process::Stdio::piped())
                .spawn()
                .unwrap()
        })
        .collect();
    for child in children {
        let output = child.wait_with_output().unwrap();
        assert_eq!(output.status.code(), Some(1));
        assert_eq!(
            String::from_utf8_lossy(&output.stdout)
                .matches("TL102")
                .count(),
            20
        );
        assert_eq!(String::from_utf8_lossy(&output.stderr), "");
    }
    // One whole file holding all twenty: the next run reads every finding from it.
    mark_cache(&project);
    let warm = check(&project, &["."]);
    assert_eq!(warm.stdout.matches(EDITED).count(), 20, "{warm:#?}");
    let mut leftovers: Vec<_> = fs::read_dir(results(&project).parent().unwrap())
        .unwrap()
        .map(|e| e.unwrap().file_name())
        .collect();
    leftovers.sort();
    assert_eq!(leftovers, ["results.postcard", "runs"]);
}

#[test]
fn an_unwritable_cache_warns_and_still_lints() {
    let project = Project::new();
    project.write("eval.py", EVAL_HAZARD);
    // A file where the cache folder should be: nothing can be written under it.
    project.write("blocked", "");
    let run = check(&project, &["--cache-dir", "blocked/cache"]);
    assert_eq!(run.code, 1);
    assert_eq!(
        run.findings(),
        ["eval.py:10:22: TL101", "eval.py:11:5: TL102"]
    );
    assert!(
        run.stderr
            .starts_with("warning: cannot write the result cache in blocked/cache:"),
        "{run:#?}"
    );
    assert!(run.stderr.contains("--no-cache"), "{run:#?}");
}

#[test]
fn cache_dir_moves_the_cache() {
    let project = Project::new();
    project.write("eval.py", EVAL_HAZARD);
    let run = project
        .command()
        .args(["check", "-q", "eval.py"])
        .env("TORCHLINT_CACHE_DIR", project.path().join("elsewhere"))
        .output()
        .unwrap();
    assert_eq!(run.status.code(), Some(1));
    assert!(project.path().join("elsewhere/CACHEDIR.TAG").exists());
    assert!(!project.path().join(".torchlint_cache").exists());
}

#[test]
fn a_cached_notebook_finding_keeps_its_cell() {
    let project = Project::new();
    let notebook = fs::read(
        std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
            .join("tests/fixtures/notebooks/training.ipynb"),
    )
    .unwrap();
    project.write("training.ipynb", notebook);
    let cold = check(&project, &[]);
    assert!(
        cold.stdout
            .contains("training.ipynb:cell 3:line 13:5: TL102"),
        "{cold:#?}"
    );
    let bytes = fs::read(results(&project)).unwrap();
    fs::write(
        results(&project),
        replace_bytes(&bytes, "`losses` accumulates", "`CACHED` accumulates"),
    )
    .unwrap();
    forget_records(&project);
    let warm = check(&project, &[]);
    assert!(
        warm.stdout
            .contains("training.ipynb:cell 3:line 13:5: TL102 `CACHED` accumulates"),
        "{warm:#?}"
    );
    assert_eq!(warm.findings(), cold.findings());
}

#[test]
fn an_edited_user_rule_file_is_linted_again() {
    let rule = |message: &str| {
        format!(
            r#"+++
code = "ACME001"
name = "no-cuda-sync"
pack = "lint-rules"
severity = "info"
enabled-by-default = true
message = "{message}"
implementation = "declarative"

[[match]]
pattern = '''(call function: (_) @callee) @call'''
require = [{{ resolves = "callee", to = ["torch.cuda.synchronize"] }}]
+++
## What it does

Flags `torch.cuda.synchronize()`.
"#
        )
    };
    let project = Project::new();
    project.write("lint-rules/no-cuda-sync.md", rule("first wording"));
    project.write("torchlint.toml", "extend-rule-packs = [\"lint-rules\"]\n");
    project.write("train.py", "import torch\ntorch.cuda.synchronize()\n");
    let first = check(&project, &["--select", "ACME"]);
    assert!(first.stdout.contains("first wording"), "{first:#?}");

    project.write("lint-rules/no-cuda-sync.md", rule("second wording"));
    let second = check(&project, &["--select", "ACME"]);
    assert!(second.stdout.contains("second wording"), "{second:#?}");
}

/// The run records: what the last run on the same named files reported, replayed while
/// nothing that run read has changed.
fn records(project: &Project) -> Vec<PathBuf> {
    let folder = results(project).with_file_name("runs");
    let mut records: Vec<PathBuf> = fs::read_dir(folder)
        .map(|entries| entries.map(|entry| entry.unwrap().path()).collect())
        .unwrap_or_default();
    records.sort();
    records
}

fn forget_records(project: &Project) {
    let _ = fs::remove_dir_all(results(project).with_file_name("runs"));
}

/// Rewrites the recorded messages (`from` into `to`, of the same length), so that a replay
/// shows.
fn mark_records(project: &Project, from: &str, to: &str) {
    let records = records(project);
    assert!(!records.is_empty(), "a run record");
    for record in records {
        let bytes = fs::read(&record).unwrap();
        fs::write(record, replace_bytes(&bytes, from, to)).unwrap();
    }
}

/// A run does not record what it read of files changed just before it started (they may
/// still change within the tick their stamps show): waiting out that margin lets it record.
fn settle() {
    std::thread::sleep(Duration::from_millis(250));
}

#[test]
fn a_run_on_unchanged_files_replays_the_last_report() {
    let project = Project::new();
    project.write("eval.py", EVAL_HAZARD);
    let cold = check(&project, &["eval.py"]);
    settle();
    assert_eq!(check(&project, &["eval.py"]).findings(), cold.findings());
    mark_records(&project, REAL, EDITED);
    let replayed = check(&project, &["eval.py"]);
    assert!(replayed.stdout.contains(EDITED), "{replayed:#?}");
    assert_eq!(replayed.findings(), cold.findings());
    assert_eq!(replayed.code, 1);

    // Another selection is another run; an edit to the file is a change.
    let other = check(&project, &["eval.py", "--select", "TL102"]);
    assert!(other.stdout.contains(REAL), "{other:#?}");
    project.write("eval.py", format!("# edited\n{EVAL_HAZARD}"));
    let edited = check(&project, &["eval.py"]);
    assert!(edited.stdout.contains(REAL), "{edited:#?}");
    assert_eq!(
        edited.findings(),
        ["eval.py:11:22: TL101", "eval.py:12:5: TL102"]
    );
}

#[test]
fn a_new_or_changed_caller_of_a_named_file_is_noticed() {
    // `evaluate` is flagged while some caller runs it with grad on: the named file never
    // changes, its finding follows the context (a config makes the folder a project).
    let project = Project::new();
    project.write("torchlint.toml", "# the project\n");
    project.write(
        "metrics.py",
        "import torch\n\ndef evaluate(model, loader):\n    model.eval()\n    correct = 0\n    for x, y in loader:\n        correct += (model(x.cuda()).argmax(1) == y.cuda()).sum().item()\n    return correct\n",
    );
    let no_grad_caller = "import torch\nfrom metrics import evaluate\n\ndef fit(model, loader):\n    with torch.no_grad():\n        return evaluate(model, loader)\n";
    let grad_caller = "from metrics import evaluate\n\ndef fit(model, loader):\n    return evaluate(model, loader)\n";
    let tl101 = |project: &Project| check(project, &["--select", "TL101", "metrics.py"]);
    let flagged = ["metrics.py:7:21: TL101"];
    let recorded = |project: &Project, findings: &[&str]| {
        settle();
        assert_eq!(tl101(project).findings(), findings);
        mark_records(project, "evaluation code", "EVALUATION CODE");
        let replayed = tl101(project);
        assert_eq!(replayed.findings(), findings);
        if !findings.is_empty() {
            assert!(replayed.stdout.contains("EVALUATION CODE"), "{replayed:#?}");
        }
    };

    project.write("train.py", grad_caller);
    // The first run makes the cache folder, a change to the project folder it does not record.
    tl101(&project);
    recorded(&project, &flagged);
    // The caller changes.
    project.write("train.py", no_grad_caller);
    assert_eq!(tl101(&project).findings(), Vec::<String>::new());
    recorded(&project, &[]);
    // A new caller appears, in a new folder.
    project.write(
        "jobs/nightly.py",
        grad_caller.replace("from metrics", "from ..metrics"),
    );
    let run = tl101(&project);
    assert_eq!(run.findings(), flagged);
    assert!(run.stdout.contains("evaluation code"), "{run:#?}");
    recorded(&project, &flagged);
    // It goes away again.
    fs::remove_file(project.path().join("jobs/nightly.py")).unwrap();
    assert_eq!(tl101(&project).findings(), Vec::<String>::new());
}

#[test]
fn a_file_linted_as_context_is_linted_again_when_named() {
    // `torchlint train.py` reads eval.py (which train.py imports) only for its facts: what
    // the cache keeps of it then has no findings to replay when eval.py itself is named.
    let project = Project::new();
    project.write("torchlint.toml", "# the project\n");
    project.write("eval.py", EVAL_HAZARD);
    project.write("train.py", "from eval import total\n\nprint(total)\n");
    let context = check(&project, &["train.py"]);
    assert_eq!(context.code, 0, "{context:#?}");
    assert_eq!(context.findings(), Vec::<String>::new());

    let named = check(&project, &["eval.py"]);
    assert_eq!(
        named.findings(),
        ["eval.py:10:22: TL101", "eval.py:11:5: TL102"],
        "{named:#?}"
    );
    // And now that they were made, a run on both reads eval.py's from the cache.
    mark_cache(&project);
    let both = check(&project, &["eval.py", "train.py"]);
    assert!(both.stdout.contains(EDITED), "{both:#?}");
}
