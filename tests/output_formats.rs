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
    let schema: serde_json::Value = serde_json::from_str(
        &std::fs::read_to_string(
            Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/sarif-schema-2.1.0.json"),
        )
        .unwrap(),
    )
    .unwrap();
    // The official schema's `run.language` pattern has a stray `]` (an erratum of the OASIS
    // file, in `run` and `toolComponent`) that the validator's meta-schema check rejects; we never
    // emit `language`.
    let mut schema = schema;
    for definition in ["run", "toolComponent"] {
        schema["definitions"][definition]["properties"]["language"]["pattern"] =
            serde_json::json!("^[a-zA-Z]{2}(-[a-zA-Z]{2})?$");
    }
    let validator = jsonschema::validator_for(&schema).expect("the SARIF schema compiles");
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

// Messages that quote code spanning lines, checked by counting lines.

use common::Project;

/// The findings of a run, as JSON output lists them.
fn json_findings(project: &Project) -> Vec<serde_json::Value> {
    let run = project.run(&["check", "--output-format", "json", "."]);
    let findings: serde_json::Value =
        serde_json::from_str(&run.stdout).expect("JSON output parses");
    findings.as_array().expect("a JSON array").clone()
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
        .filter(|line| !line.starts_with("Found "))
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
