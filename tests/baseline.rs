//! `--baseline` / `--write-baseline`: a gate that fails only on findings the baseline does not
//! record, whatever else moves in the file.

mod common;

use common::Project;

/// Two hazards: TL108 (line 5) and TL102 (line 11).
const TRAIN: &str = "\
import torch
from torch import nn

model = nn.Linear(8, 1)
model.load_state_dict(torch.load(\"ckpt.pt\"))
optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
running = 0
for step in range(100):
    x = torch.randn(4, 8)
    loss = model(x).pow(2).mean()
    running += loss
    loss.backward()
    optimizer.step()
";

fn gate(project: &Project) -> common::Run {
    project.run(&[
        "check",
        "--output-format",
        "concise",
        "--no-cache",
        "--baseline",
        "torchlint-baseline.json",
        "train.py",
    ])
}

fn write_baseline(project: &Project) -> common::Run {
    let run = project.run(&[
        "check",
        "--no-cache",
        "--baseline",
        "torchlint-baseline.json",
        "--write-baseline",
        "train.py",
    ]);
    assert_eq!(run.code, 0, "{run:#?}");
    run
}

#[test]
fn recorded_findings_pass_the_gate() {
    let project = Project::new();
    project.write("train.py", TRAIN);
    let written = write_baseline(&project);
    assert_eq!(written.stdout, "");
    assert_eq!(
        written.stderr,
        "Wrote 2 findings to torchlint-baseline.json.\n"
    );

    let run = gate(&project);
    assert_eq!(run.code, 0, "{run:#?}");
    assert_eq!(run.findings(), Vec::<String>::new());
    assert_eq!(
        run.stderr,
        "2 findings in the baseline not shown (torchlint-baseline.json).\n"
    );
}

#[test]
fn shifted_lines_renamed_variables_and_a_new_hazard_fail_only_on_the_new_one() {
    let project = Project::new();
    project.write("train.py", TRAIN);
    write_baseline(&project);

    // Lines move (a docstring and imports above), an unrelated variable is renamed
    // (`x` → `batch`), the loop is re-indented by a wrapper: only a new hazard counts.
    let edited = "\
\"\"\"Training entry point.\"\"\"
import os
import torch
from torch import nn

model = nn.Linear(8, 1)
model.load_state_dict(torch.load(\"ckpt.pt\"))
optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
running = 0
history = []


def main():
    global running
    for step in range(100):
        batch = torch.randn(4, 8)
        loss = model(batch).pow(2).mean()
        running += loss
        history.append(loss)
        loss.backward()
        optimizer.step()
";
    project.write("train.py", edited);
    let run = gate(&project);
    assert_eq!(run.findings(), ["train.py:19:9: TL102"], "{run:#?}");
    assert!(
        run.stdout.contains("`history` accumulates `loss`"),
        "{run:#?}"
    );
    assert_eq!(run.code, 1);
    assert!(run.stderr.contains("2 findings in the baseline not shown"));
}

#[test]
fn a_fixed_finding_is_reported_and_does_not_fail() {
    let project = Project::new();
    project.write("train.py", TRAIN);
    write_baseline(&project);
    project.write(
        "train.py",
        TRAIN.replace("running += loss", "running += loss.item()"),
    );

    let run = gate(&project);
    assert_eq!(run.code, 0, "{run:#?}");
    assert_eq!(
        run.stderr,
        "1 finding in the baseline not shown (torchlint-baseline.json).\n\
         1 baseline entry is no longer found (fixed); `--write-baseline` drops them:\n  \
         train.py: TL102 `running += loss`\n"
    );

    write_baseline(&project);
    let baseline = std::fs::read_to_string(project.path().join("torchlint-baseline.json")).unwrap();
    assert!(!baseline.contains("TL102"), "{baseline}");
}

#[test]
fn a_second_identical_hazard_is_new_even_though_its_text_is_recorded() {
    let project = Project::new();
    project.write("train.py", TRAIN);
    write_baseline(&project);
    project.write(
        "train.py",
        TRAIN.replace(
            "    running += loss\n",
            "    running += loss\n    running += loss\n",
        ),
    );
    let run = gate(&project);
    assert_eq!(run.findings(), ["train.py:12:5: TL102"], "{run:#?}");
    assert_eq!(run.code, 1);
}

#[test]
fn the_baseline_is_sorted_deterministic_json() {
    let project = Project::new();
    project.write("b.py", TRAIN);
    project.write("a.py", TRAIN);
    let args = [
        "check",
        "--no-cache",
        "--baseline",
        "base.json",
        "--write-baseline",
        ".",
    ];
    assert_eq!(project.run(&args).code, 0);
    let first = std::fs::read_to_string(project.path().join("base.json")).unwrap();
    assert_eq!(project.run(&args).code, 0);
    let second = std::fs::read_to_string(project.path().join("base.json")).unwrap();
    assert_eq!(first, second);
    insta::assert_snapshot!(first);
}

#[test]
fn a_run_over_some_files_keeps_and_does_not_judge_the_others() {
    let project = Project::new();
    project.write("train.py", TRAIN);
    project.write("other.py", TRAIN);
    let all = [
        "check",
        "--no-cache",
        "--baseline",
        "base.json",
        "--write-baseline",
        ".",
    ];
    assert_eq!(project.run(&all).code, 0);

    // pre-commit passes only the staged files: the others' entries are neither fixed nor lost.
    let one = project.run(&[
        "check",
        "--no-cache",
        "--output-format",
        "concise",
        "--baseline",
        "base.json",
        "train.py",
    ]);
    assert_eq!(one.code, 0, "{one:#?}");
    assert!(!one.stderr.contains("fixed"), "{one:#?}");

    project.write("train.py", "print('clean')\n");
    let rewrite = project.run(&[
        "check",
        "--no-cache",
        "--baseline",
        "base.json",
        "--write-baseline",
        "train.py",
    ]);
    assert_eq!(rewrite.stderr, "Wrote 2 findings to base.json.\n");
    let baseline = std::fs::read_to_string(project.path().join("base.json")).unwrap();
    assert!(baseline.contains("\"file\": \"other.py\""), "{baseline}");
    assert!(!baseline.contains("\"file\": \"train.py\""), "{baseline}");
}

#[test]
fn the_baseline_matches_from_another_working_directory() {
    let project = Project::new();
    project.write("src/train.py", TRAIN);
    project.write("torchlint-baseline.json", "");
    let run = project.run(&[
        "check",
        "--no-cache",
        "--baseline",
        "torchlint-baseline.json",
        "--write-baseline",
        "src",
    ]);
    assert_eq!(run.code, 0, "{run:#?}");
    let from_src = project
        .command()
        .current_dir(project.path().join("src"))
        .args([
            "check",
            "--no-cache",
            "--baseline",
            "../torchlint-baseline.json",
            "train.py",
        ])
        .output()
        .unwrap();
    assert_eq!(from_src.status.code(), Some(0), "{from_src:#?}");
}

#[test]
fn a_missing_or_broken_baseline_is_a_clear_error() {
    let project = Project::new();
    project.write("train.py", TRAIN);
    let run = gate(&project);
    assert_eq!(run.code, 2);
    assert!(
        run.stderr
            .starts_with("error: torchlint-baseline.json: cannot read the baseline:"),
        "{run:#?}"
    );
    assert!(run.stderr.contains("--write-baseline"), "{run:#?}");

    project.write(
        "torchlint-baseline.json",
        "{\"version\": 1, \"findings\": [",
    );
    let run = gate(&project);
    assert_eq!(run.code, 2);
    assert!(
        run.stderr
            .starts_with("error: torchlint-baseline.json:1: not a torchlint baseline:"),
        "{run:#?}"
    );
    assert_eq!(run.stdout, "");
}
