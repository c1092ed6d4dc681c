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
