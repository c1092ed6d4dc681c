//! Every output format on one fixture set, as insta snapshots, and the SARIF output checked
//! against the official SARIF 2.1.0 schema.

mod common;

use std::path::{Path, PathBuf};
use std::process::Command;

fn fixtures() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/formats")
}

/// Runs the binary in the fixture folder; returns the exit code and stdout.
fn run_raw(format: &str) -> (i32, String) {
    let output = Command::new(env!("CARGO_BIN_EXE_torchlint"))
        .current_dir(fixtures())
        .env("NO_COLOR", "1")
        .args(["check", "--output-format", format, "."])
        .output()
        .expect("run torchlint");
    (
        output.status.code().unwrap(),
        String::from_utf8(output.stdout).unwrap(),
    )
}

/// Like [`run_raw`], with absolute paths as `[FIXTURES]` and the version as `[VERSION]`.
fn run(format: &str) -> (i32, String) {
    let (code, stdout) = run_raw(format);
    let root = fixtures().display().to_string();
    let stdout = stdout
        .replace(&format!("file://{root}"), "file://[FIXTURES]")
        .replace(&root, "[FIXTURES]")
        .replace(env!("CARGO_PKG_VERSION"), "[VERSION]");
    (code, stdout)
}

#[test]
fn full() {
    let (code, stdout) = run("full");
    assert_eq!(code, 1);
    insta::assert_snapshot!(stdout);
}

#[test]
fn concise() {
    let (code, stdout) = run("concise");
    assert_eq!(code, 1);
    insta::assert_snapshot!(stdout);
}

#[test]
fn json() {
    let (code, stdout) = run("json");
    assert_eq!(code, 1);
    insta::assert_snapshot!(stdout);
}

#[test]
fn json_lines() {
    let (code, stdout) = run("json-lines");
    assert_eq!(code, 1);
    // The JSON format's objects, one per line.
    let (_, json) = run("json");
    let array: Vec<serde_json::Value> = serde_json::from_str(&json).unwrap();
    let lines: Vec<serde_json::Value> = stdout
        .lines()
        .map(|line| serde_json::from_str(line).unwrap())
        .collect();
    assert_eq!(lines, array);
    insta::assert_snapshot!(stdout);
}

#[test]
fn pylint() {
    let (code, stdout) = run("pylint");
    assert_eq!(code, 1);
    insta::assert_snapshot!(stdout);
}

#[test]
fn rdjson() {
    let (code, stdout) = run("rdjson");
    assert_eq!(code, 1);
    insta::assert_snapshot!(stdout);
}

#[test]
fn github() {
    let (code, stdout) = run("github");
    assert_eq!(code, 1);
    insta::assert_snapshot!(stdout);
}

#[test]
fn gitlab() {
    let (code, stdout) = run("gitlab");
    assert_eq!(code, 1);
    let issues: serde_json::Value = serde_json::from_str(&stdout).unwrap();
    let fingerprints: std::collections::HashSet<&str> = issues
        .as_array()
        .unwrap()
        .iter()
        .map(|issue| issue["fingerprint"].as_str().unwrap())
        .collect();
    assert_eq!(
        fingerprints.len(),
        issues.as_array().unwrap().len(),
        "unique fingerprints"
    );
    insta::assert_snapshot!(stdout);
}

#[test]
fn junit() {
    let (code, stdout) = run("junit");
    assert_eq!(code, 1);
    insta::assert_snapshot!(stdout);
}

#[test]
fn sarif() {
    let (code, stdout) = run("sarif");
    assert_eq!(code, 1);
    insta::assert_snapshot!(stdout);
}

#[test]
fn sarif_is_valid_against_the_official_schema() {
    let validator = sarif_validator();
    let (_, stdout) = run_raw("sarif");
    let instance: serde_json::Value = serde_json::from_str(&stdout).unwrap();
    let errors: Vec<String> = validator
        .iter_errors(&instance)
        .map(|e| format!("{} at {}", e, e.instance_path()))
        .collect();
    assert!(
        errors.is_empty(),
        "SARIF does not match the schema:\n{}",
        errors.join("\n")
    );

    // The schema must also reject what is not SARIF, or this test proves nothing.
    let mut broken = instance.clone();
    broken["runs"][0]["results"][0]["level"] = serde_json::json!("catastrophic");
    assert!(!validator.is_valid(&broken));

    let results = instance["runs"][0]["results"].as_array().unwrap();
    assert_eq!(results.len(), 4);
    let rules = instance["runs"][0]["tool"]["driver"]["rules"]
        .as_array()
        .unwrap();
    for result in results {
        let index = result["ruleIndex"].as_u64().unwrap() as usize;
        assert_eq!(rules[index]["id"], result["ruleId"]);
    }
}

// Hostile input: what every format must survive, checked by real parsers and by counting lines.

use common::Project;

const FORMATS: [&str; 10] = [
    "full",
    "concise",
    "json",
    "json-lines",
    "sarif",
    "github",
    "gitlab",
    "junit",
    "pylint",
    "rdjson",
];

/// A name with XML markup, characters XML 1.0 cannot carry (U+FFFE, U+FFFF, U+0001) and an
/// escape character.
const HOSTILE_NAME: &str = "a<&\"'>\u{FFFE}\u{FFFF}\u{1}\u{1b}.py";

/// An evaluation loop whose TL101 message quotes the forward call, a string with markup,
/// U+FFFE, U+FFFF and control characters, and whose TL102 ones quote a call with a newline in a
/// string: the fuzz's failing input, reduced.
const HOSTILE_SOURCE: &str = "import torch
from torch import nn

model = nn.Linear(8, 1).cuda()
model.eval()
kept = []
for step in range(10):
    x = torch.randn(4, 8).cuda()
    out = model(x, \"<&\\\"'> \u{FFFE}\u{FFFF} \u{1}\u{1b}[2J \u{7f}\")
    kept.append(model(x, \"\"\"first
second\"\"\"))
    kept.append(out)
";

fn hostile_project() -> Project {
    let project = Project::new();
    project.write(HOSTILE_NAME, HOSTILE_SOURCE);
    project.write("ok.py", "x = 1\n");
    project
}

/// The findings of a run, as JSON output lists them.
fn json_findings(project: &Project) -> Vec<serde_json::Value> {
    let run = project.run(&["check", "--output-format", "json", "."]);
    let findings: serde_json::Value =
        serde_json::from_str(&run.stdout).expect("JSON output parses");
    findings.as_array().expect("a JSON array").clone()
}

fn sarif_validator() -> jsonschema::Validator {
    let mut schema: serde_json::Value = serde_json::from_str(
        &std::fs::read_to_string(
            Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/sarif-schema-2.1.0.json"),
        )
        .unwrap(),
    )
    .unwrap();
    // The official schema's `run.language` pattern has a stray `]` (an erratum of the OASIS
    // file, in `run` and `toolComponent`) that the validator's meta-schema check rejects; we never
    // emit `language`.
    for definition in ["run", "toolComponent"] {
        schema["definitions"][definition]["properties"]["language"]["pattern"] =
            serde_json::json!("^[a-zA-Z]{2}(-[a-zA-Z]{2})?$");
    }
    jsonschema::validator_for(&schema).expect("the SARIF schema compiles")
}

/// Every machine-readable format parses with a real parser (XML well-formedness by
/// roxmltree, JSON by serde_json, SARIF also against its schema) and carries every finding;
/// the text formats keep one line per finding; nothing XML cannot carry reaches JUnit.
#[test]
fn every_format_survives_hostile_names_and_messages() {
    let project = hostile_project();
    let findings = json_findings(&project);
    let codes: Vec<&str> = findings
        .iter()
        .map(|f| f["code"].as_str().unwrap())
        .collect();
    // Line 10's forward call and the list keeping its output are one finding (TL101's).
    assert_eq!(codes, ["TL101", "TL101", "TL102"], "{findings:#?}");
    // JSON keeps the name exactly.
    assert!(
        findings[0]["filename"]
            .as_str()
            .unwrap()
            .ends_with(HOSTILE_NAME)
    );
    let n = findings.len();

    for format in FORMATS {
        let run = project.run(&["check", "--output-format", format, "."]);
        assert_eq!(run.code, 1, "{format}: {}", run.stderr);
        let out = &run.stdout;
        match format {
            "json" | "gitlab" => {
                let parsed: serde_json::Value = serde_json::from_str(out)
                    .unwrap_or_else(|e| panic!("{format} output does not parse: {e}\n{out}"));
                assert_eq!(parsed.as_array().unwrap().len(), n, "{format}");
            }
            "json-lines" => {
                for line in out.lines() {
                    serde_json::from_str::<serde_json::Value>(line)
                        .unwrap_or_else(|e| panic!("a JSON line does not parse: {e}\n{line}"));
                }
                assert_eq!(out.lines().count(), n, "{out}");
            }
            "rdjson" => {
                let parsed: serde_json::Value = serde_json::from_str(out)
                    .unwrap_or_else(|e| panic!("rdjson output does not parse: {e}\n{out}"));
                assert_eq!(parsed["diagnostics"].as_array().unwrap().len(), n);
            }
            "sarif" => {
                let parsed: serde_json::Value = serde_json::from_str(out)
                    .unwrap_or_else(|e| panic!("SARIF output does not parse: {e}\n{out}"));
                let validator = sarif_validator();
                let errors: Vec<String> = validator
                    .iter_errors(&parsed)
                    .map(|e| format!("{e} at {}", e.instance_path()))
                    .collect();
                assert!(errors.is_empty(), "{}", errors.join("\n"));
                assert_eq!(parsed["runs"][0]["results"].as_array().unwrap().len(), n);
            }
            "junit" => {
                let document = roxmltree::Document::parse(out).unwrap_or_else(|e| {
                    panic!("JUnit output is not well-formed XML: {e}\n{out:?}")
                });
                let failures: Vec<roxmltree::Node<'_, '_>> = document
                    .descendants()
                    .filter(|node| node.has_tag_name("failure"))
                    .collect();
                assert_eq!(failures.len(), n);
                let suite = document
                    .descendants()
                    .find(|node| {
                        node.has_tag_name("testsuite") && node.attribute("tests") == Some("3")
                    })
                    .unwrap();
                // The name as the text formats show it: markup intact, control characters
                // escaped, what XML cannot carry replaced.
                assert_eq!(
                    suite.attribute("name"),
                    Some("a<&\"'>\u{FFFD}\u{FFFD}\\x01\\x1b.py")
                );
                let message = failures[0].attribute("message").unwrap();
                assert!(
                    message.starts_with(
                        "`model(x, \"<&\\\"'> \u{FFFD}\u{FFFD} \\x01\\x1b[2J \\x7f\")` runs"
                    ),
                    "{message:?}"
                );
            }
            "concise" | "github" | "pylint" => {
                let lines: Vec<&str> = out
                    .lines()
                    .filter(|line| {
                        !line.starts_with("Found ") && !line.starts_with("No fixes available")
                    })
                    .collect();
                assert_eq!(lines.len(), n, "{format}: one line per finding:\n{out}");
                assert!(!out.contains('\u{1b}'), "{format}: {out:?}");
                assert!(!out.contains('\u{1}'), "{format}: {out:?}");
            }
            "full" => {
                assert!(
                    out.contains("a<&\"'>\u{FFFE}\u{FFFF}\\x01\\x1b.py:9:11"),
                    "{out:?}"
                );
            }
            _ => unreachable!(),
        }
    }
}

/// Every rule that quotes code, on expressions written over several lines, and syntax errors
/// on lines ended by a lone `\r`.
const MULTI_LINE_TRAIN: &str = r#"import torch
import torch.nn as nn
import torch.nn.functional as F
from torch.utils.data import DataLoader

model = nn.Sequential(nn.Linear(64, 256), nn.ReLU(), nn.Linear(256, 10)).cuda()
opt = torch.optim.Adam(model.parameters())
torch.autograd.set_detect_anomaly(
    True)
state = torch.load(
    "checkpoint.pt")
loader = DataLoader(
    dataset, batch_size=64,
    num_workers=(
        64), pin_memory=True)
losses = []
outputs = []
history = []
for x, y in loader:
    out = (model
           (x.cuda()))
    loss = F.cross_entropy(
        out, y.cuda())
    opt.zero_grad()
    (loss
     * 2).backward(
        retain_graph=True)
    opt.step()
    (losses
     ).append(
        loss)
    outputs.append((out
                    ))
    handle = (model
              ).register_forward_hook(
        lambda m, i, o: None)
    torch.cuda.empty_cache(
    )
    big = (x
           .double()).cuda()

model.eval()
kept = []
for x, y in loader:
    pred = (model
            (x.cuda(),
             """a
b"""))
    kept.append(pred)
"#;

const MULTI_LINE_MORE: &str = r#"import numpy as np
import torch
import torch.nn as nn
import torch.nn.functional as F

rnn = nn.GRU(input_size=32, hidden_size=256, batch_first=True).cuda()
head = nn.Linear(256, 32).cuda()
opt = torch.optim.Adam([*rnn.parameters(), *head.parameters()])
model = nn.Sequential(nn.Linear(128, 256), nn.ReLU(), nn.Linear(256, 10)).cuda()

def train(chunks):
    h = None
    for x, y in chunks:
        out, h = rnn(
            x.cuda(), h)
        loss = F.mse_loss(head(out), y.cuda())
        opt.zero_grad()
        loss.backward()
        opt.step()

@torch.no_grad()
def predict(loader):
    model.eval()
    all_logits = []
    for x, _ in loader:
        all_logits.append(model(
            x.cuda()))
    return torch.cat(all_logits).cpu()

rng = np.random.default_rng(0)
features = rng.normal(size=(100_000, 64))
X = torch.from_numpy((features
                      ))
"#;

const MULTI_LINE_BROKEN: &str = "import torch\nx = (1 +\r  2 $ 3)\r\ny = [\r\n  4 $$ 5]\n";

/// `concise` and `github` print one line per finding, whatever the code a message quotes
/// spans; JSON says how many findings there are.
#[test]
fn one_line_per_finding_when_messages_quote_multi_line_code() {
    let project = Project::new();
    project.write("train.py", MULTI_LINE_TRAIN);
    project.write("more.py", MULTI_LINE_MORE);
    project.write("broken.py", MULTI_LINE_BROKEN);
    let findings = json_findings(&project);
    let mut codes: Vec<&str> = findings
        .iter()
        .map(|f| f["code"].as_str().unwrap())
        .collect();
    codes.sort_unstable();
    codes.dedup();
    assert_eq!(
        codes,
        [
            "TL001", "TL101", "TL102", "TL103", "TL104", "TL105", "TL106", "TL107", "TL108",
            "TL109", "TL201", "TL202"
        ],
        "every rule fires: {findings:#?}"
    );
    for finding in &findings {
        let message = finding["message"].as_str().unwrap();
        assert!(
            !message.contains(['\n', '\r']),
            "{}: {message:?}",
            finding["code"]
        );
    }

    let concise = project.run(&["check", "--output-format", "concise", "."]);
    let lines: Vec<&str> = concise
        .stdout
        .lines()
        .filter(|line| !line.starts_with("Found ") && !line.starts_with("No fixes available"))
        .collect();
    assert_eq!(lines.len(), findings.len(), "{}", concise.stdout);
    assert_eq!(
        concise.findings().len(),
        findings.len(),
        "{}",
        concise.stdout
    );

    let github = project.run(&["check", "--output-format", "github", "."]);
    assert_eq!(
        github.stdout.lines().count(),
        findings.len(),
        "{}",
        github.stdout
    );
    assert!(github.stdout.lines().all(|line| line.starts_with("::")));
}

/// File names that are not UTF-8 or hold a newline and an escape character (Linux allows
/// both): the text formats and stderr show them escaped (`bad\xff.py`, `new\nline\x1b.py`),
/// one line per finding; JSON keeps a UTF-8 name exactly (and cannot carry the byte 0xff:
/// U+FFFD stands for it there), SARIF's URI percent-encodes the byte; every format parses.
#[cfg(unix)]
#[test]
fn file_names_that_are_not_utf8_or_hold_control_characters_are_shown_escaped() {
    use std::ffi::OsStr;
    use std::os::unix::ffi::OsStrExt;

    let project = Project::new();
    std::fs::write(
        project.path().join(OsStr::from_bytes(b"bad\xff.py")),
        common::EVAL_HAZARD,
    )
    .unwrap();
    project.write("new\nline\u{1b}.py", common::EVAL_HAZARD);
    // Unreadable as UTF-8: an error on stderr that names the file.
    std::fs::write(
        project.path().join(OsStr::from_bytes(b"latin\xe9\x1b.py")),
        b"name = '\xe9t\xe9'\n",
    )
    .unwrap();

    let concise = project.run(&["check", "--output-format", "concise", "."]);
    assert_eq!(concise.code, 2, "{concise:#?}");
    let lines: Vec<&str> = concise
        .stdout
        .lines()
        .filter(|line| !line.starts_with("Found ") && !line.starts_with("No fixes available"))
        .collect();
    assert_eq!(
        lines,
        [
            "bad\\xff.py:10:22: TL101 `model(x)` runs a forward pass in evaluation code with autograd on: it records the graph and holds this batch's saved activations, and once an output or loss is kept, every batch's graph stays alive: grows each iteration",
            "bad\\xff.py:11:5: TL102 `total` accumulates `loss` with its autograd graph: no backward frees its activations, so the memory of the model's device grows every step",
            "new\\nline\\x1b.py:10:22: TL101 `model(x)` runs a forward pass in evaluation code with autograd on: it records the graph and holds this batch's saved activations, and once an output or loss is kept, every batch's graph stays alive: grows each iteration",
            "new\\nline\\x1b.py:11:5: TL102 `total` accumulates `loss` with its autograd graph: no backward frees its activations, so the memory of the model's device grows every step",
        ],
        "{}",
        concise.stdout
    );
    let errors: Vec<&str> = concise
        .stderr
        .lines()
        .filter(|line| line.starts_with("error: "))
        .collect();
    assert_eq!(errors.len(), 1, "{}", concise.stderr);
    assert!(
        errors[0].starts_with("error: latin\\xe9\\x1b.py: "),
        "{}",
        concise.stderr
    );
    assert!(!concise.stderr.contains('\u{1b}'), "{:?}", concise.stderr);

    let github = project.run(&["check", "--output-format", "github", "."]);
    let lines: Vec<&str> = github.stdout.lines().collect();
    // The file that could not be read is an annotation too (TL003), its name escaped.
    assert_eq!(lines.len(), 5, "{}", github.stdout);
    assert!(
        lines[0].contains(",file=bad\\xff.py,line=10,"),
        "{}",
        lines[0]
    );
    assert!(
        lines[2].contains("TL003 io-error),file=latin\\xe9\\x1b.py,line=1,"),
        "{}",
        lines[2]
    );
    assert!(
        lines[3].contains(",file=new\\nline\\x1b.py,line=10,"),
        "{}",
        lines[3]
    );
    assert!(!github.stdout.contains('\u{1b}'));

    let full = project.run(&["check", "--output-format", "full", "."]);
    assert!(full.stdout.contains("bad\\xff.py:10:22"), "{}", full.stdout);
    assert!(
        full.stdout.contains("new\\nline\\x1b.py:10:22"),
        "{}",
        full.stdout
    );
    assert!(!full.stdout.contains('\u{1b}'), "{:?}", full.stdout);

    let junit = project.run(&["check", "--output-format", "junit", "."]);
    let document = roxmltree::Document::parse(&junit.stdout).expect("well-formed JUnit");
    let suites: Vec<&str> = document
        .descendants()
        .filter(|node| node.has_tag_name("testsuite"))
        .filter_map(|node| node.attribute("name"))
        .collect();
    assert_eq!(
        suites,
        ["bad\\xff.py", "latin\\xe9\\x1b.py", "new\\nline\\x1b.py"]
    );

    let json = json_findings(&project);
    let names: Vec<String> = json
        .iter()
        .map(|f| {
            let name = f["filename"].as_str().unwrap();
            Path::new(name)
                .file_name()
                .unwrap()
                .to_str()
                .unwrap()
                .to_owned()
        })
        .collect();
    assert_eq!(
        names,
        [
            "bad\u{FFFD}.py",
            "bad\u{FFFD}.py",
            "latin\u{FFFD}\u{1b}.py",
            "new\nline\u{1b}.py",
            "new\nline\u{1b}.py"
        ]
    );

    let sarif = project.run(&["check", "--output-format", "sarif", "."]);
    let sarif: serde_json::Value = serde_json::from_str(&sarif.stdout).unwrap();
    let uri = sarif["runs"][0]["results"][0]["locations"][0]["physicalLocation"]
        ["artifactLocation"]["uri"]
        .as_str()
        .unwrap();
    assert!(uri.ends_with("/bad%FF.py"), "{uri}");
    let gitlab = project.run(&["check", "--output-format", "gitlab", "."]);
    let gitlab: serde_json::Value = serde_json::from_str(&gitlab.stdout).unwrap();
    assert_eq!(gitlab.as_array().unwrap().len(), 5);
}

/// A minified line with thousands of findings: the full format shows a window of the line
/// around each one (with the file's own column), not the whole line once per finding, whose
/// output grew with the square of the line's length (715 MB for 5,000 loads on one line).
#[test]
fn full_format_cuts_long_lines_to_what_a_finding_points_at() {
    let project = Project::new();
    let line = vec!["t = torch.load(f)"; 5000].join("; ");
    project.write("minified.py", format!("import torch\n{line}\n"));
    let run = project.run(&["check", "--no-cache", "minified.py"]);
    assert_eq!(run.stdout.matches("warning[TL108]").count(), 5000);
    let last_column = (5000 - 1) * "t = torch.load(f); ".len() + 5;
    assert!(
        run.stdout
            .contains(&format!("minified.py:2:{last_column}\n")),
        "the last finding keeps its column"
    );
    let longest = run.stdout.lines().map(|l| l.chars().count()).max().unwrap();
    assert!(longest < 300, "a snippet line of {longest} characters");
    assert!(
        run.stdout
            .lines()
            .any(|l| l.starts_with("2 │ …") && l.ends_with('…')),
        "a line cut on both sides"
    );
}

/// A path that cannot be linted (missing, not UTF-8) keeps its stderr error and exit status 2,
/// and is also an entry (TL003) of every machine-readable report, so a CI step reading only the
/// report shows it as failed; the text formats keep it on stderr alone.
#[test]
fn a_path_that_cannot_be_linted_is_an_entry_of_the_machine_formats() {
    let project = Project::new();
    project.write("ok.py", "x = 1\n");
    project.write("latin1.py", b"name = \"caf\xe9\"\n");
    let args = |format| {
        vec![
            "check",
            "--no-cache",
            "--output-format",
            format,
            ".",
            "missing.py",
        ]
    };

    let json = project.run(&args("json"));
    assert_eq!(json.code, 2, "{}", json.stderr);
    assert!(
        json.stderr
            .contains("missing.py: no such file or directory"),
        "{}",
        json.stderr
    );
    let entries: serde_json::Value = serde_json::from_str(&json.stdout).unwrap();
    let entries = entries.as_array().unwrap();
    let shown: Vec<(&str, &str)> = entries
        .iter()
        .map(|e| {
            let name = e["filename"].as_str().unwrap();
            (
                &name[name.rfind('/').unwrap() + 1..],
                e["code"].as_str().unwrap(),
            )
        })
        .collect();
    assert_eq!(shown, [("latin1.py", "TL003"), ("missing.py", "TL003")]);
    assert_eq!(entries[1]["location"]["row"], 1);
    assert_eq!(
        entries[1]["message"],
        "cannot lint this file: no such file or directory"
    );

    let sarif = project.run(&args("sarif"));
    let sarif: serde_json::Value = serde_json::from_str(&sarif.stdout).unwrap();
    assert!(sarif_validator().is_valid(&sarif));
    assert_eq!(sarif["runs"][0]["results"].as_array().unwrap().len(), 2);
    for format in ["github", "gitlab", "junit"] {
        let run = project.run(&args(format));
        assert_eq!(run.code, 2, "{format}");
        assert!(
            run.stdout.matches("TL003").count() >= 2,
            "{format}: {}",
            run.stdout
        );
    }

    let concise = project.run(&args("concise"));
    assert_eq!(concise.code, 2);
    assert!(!concise.stdout.contains("TL003"), "{}", concise.stdout);
    assert!(concise.stderr.contains("missing.py"), "{}", concise.stderr);

    let ignored = project.run(&[
        "check",
        "--no-cache",
        "--output-format",
        "json",
        "--ignore",
        "TL003",
        "missing.py",
    ]);
    assert_eq!(ignored.code, 2);
    assert_eq!(ignored.stdout.trim(), "[]");
}
