//! Jupyter notebooks: findings point at `notebook.ipynb:cell N:line L`, magics and shell
//! escapes keep the line mapping exact, suppressions work in cells, other kernels are skipped
//! and a broken notebook is a per-file error.

mod common;

use std::path::{Path, PathBuf};
use std::process::Command;

use common::Project;
use serde_json::{Value, json};

fn fixtures() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/notebooks")
}

/// Runs the binary in the fixture folder; returns the exit code and stdout.
fn run_fixture(args: &[&str]) -> (i32, String) {
    let output = Command::new(env!("CARGO_BIN_EXE_torchlint"))
        .current_dir(fixtures())
        .env("NO_COLOR", "1")
        .env_remove("TORCHLINT_INJECT_PANIC")
        .args(args)
        .output()
        .expect("run torchlint");
    let root = fixtures().display().to_string();
    let stdout = String::from_utf8_lossy(&output.stdout).replace(&root, "[FIXTURES]");
    (output.status.code().unwrap_or(-1), stdout)
}

/// An nbformat 4.5 notebook of the given `(cell_type, source)` cells, Python kernel.
fn notebook(cells: &[(&str, &str)]) -> String {
    notebook_with_metadata(
        cells,
        json!({"kernelspec": {"display_name": "Python 3", "language": "python", "name": "python3"}}),
    )
}

fn notebook_with_metadata(cells: &[(&str, &str)], metadata: Value) -> String {
    let cells: Vec<Value> = cells
        .iter()
        .enumerate()
        .map(|(i, (kind, source))| {
            // Jupyter stores sources as lists of lines, each but the last ending with `\n`.
            let lines: Vec<&str> = source.split_inclusive('\n').collect();
            let mut cell = json!({"cell_type": kind, "id": format!("cell-{i}"), "metadata": {}, "source": lines});
            if *kind == "code" {
                cell["outputs"] = json!([]);
                cell["execution_count"] = json!(i);
            }
            cell
        })
        .collect();
    let notebook =
        json!({"cells": cells, "metadata": metadata, "nbformat": 4, "nbformat_minor": 5});
    serde_json::to_string_pretty(&notebook).expect("serializable")
}

/// A training loop that keeps every step's graph: TL102 on its last line (line 6, column 5).
const TRAINING_CELL: &str = "\
losses = []
for step in range(10):
    x = torch.randn(4, 3)
    loss = (x * torch.randn(3, requires_grad=True)).sum()
    loss.backward()
    losses.append(loss)";

#[test]
fn concise_output_points_at_the_cell_and_its_line() {
    let (code, stdout) = run_fixture(&["check", "--output-format", "concise", "."]);
    assert_eq!(code, 1, "{stdout}");
    let findings: Vec<&str> = stdout
        .lines()
        .filter_map(|line| line.split_once(": TL").map(|(location, _)| location))
        .collect();
    // The hazard is on line 13 of cell 3, after `%%time` and an indented `!nvidia-smi`; the
    // `torch.load` is in cell 7, after a `%%bash` cell and `x = !ls`.
    assert_eq!(
        findings,
        [
            "training.ipynb:cell 3:line 13:5",
            "training.ipynb:cell 7:line 3:23"
        ],
        "{stdout}"
    );
    assert!(
        stdout.contains(": TL102 `losses` accumulates `loss`"),
        "{stdout}"
    );
}

#[test]
fn json_carries_the_cell_and_cell_relative_rows() {
    let (code, stdout) = run_fixture(&["check", "--output-format", "json", "training.ipynb"]);
    assert_eq!(code, 1);
    let findings: Value = serde_json::from_str(&stdout).expect("JSON output");
    let hazard = &findings[0];
    assert_eq!(hazard["code"], "TL102");
    assert_eq!(hazard["cell"], 3);
    assert_eq!(hazard["location"], json!({"row": 13, "column": 5}));
    assert_eq!(hazard["end_location"], json!({"row": 13, "column": 24}));
    assert_eq!(hazard["noqa_row"], 13);
    assert_eq!(hazard["filename"], "[FIXTURES]/training.ipynb");

    let load = &findings[1];
    assert_eq!(load["code"], "TL108");
    assert_eq!(load["cell"], 7);
    assert_eq!(load["location"], json!({"row": 3, "column": 23}));
    let edit = &load["fix"]["edits"][0];
    assert_eq!(edit["location"], json!({"row": 3, "column": 56}));
}

#[test]
fn full_output_shows_cells_with_their_own_line_numbers() {
    let (code, stdout) = run_fixture(&["check", "training.ipynb"]);
    assert_eq!(code, 1);
    insta::assert_snapshot!(stdout);
}

#[test]
fn ci_formats_use_cell_lines_and_name_the_cell() {
    let (_, github) = run_fixture(&["check", "--output-format", "github", "training.ipynb"]);
    assert!(
        github.contains("file=training.ipynb,line=13,col=5,endLine=13,endColumn=24::training.ipynb:cell 3:line 13:5: TL102"),
        "{github}"
    );
    let (_, gitlab) = run_fixture(&["check", "--output-format", "gitlab", "training.ipynb"]);
    let issues: Value = serde_json::from_str(&gitlab).expect("JSON output");
    assert_eq!(
        issues[0]["location"]["lines"],
        json!({"begin": 13, "end": 13})
    );
    assert!(
        issues[0]["description"]
            .as_str()
            .is_some_and(|text| text.ends_with(" (cell 3, line 13)")),
        "{gitlab}"
    );
    let (_, sarif) = run_fixture(&["check", "--output-format", "sarif", "training.ipynb"]);
    let sarif: Value = serde_json::from_str(&sarif).expect("JSON output");
    let result = &sarif["runs"][0]["results"][0];
    assert_eq!(
        result["locations"][0]["physicalLocation"]["region"]["startLine"],
        13
    );
    assert!(
        result["message"]["text"]
            .as_str()
            .is_some_and(|text| text.ends_with(" (cell 3, line 13)")),
        "{result}"
    );
    let (_, junit) = run_fixture(&["check", "--output-format", "junit", "training.ipynb"]);
    assert!(
        junit.contains(r#"name="TL102 (tensor-accumulated) at cell 3:line 13:5""#)
            && junit.contains(r#"line="13""#),
        "{junit}"
    );
}

#[test]
fn notebooks_of_other_kernels_are_skipped() {
    let (code, stdout) = run_fixture(&["check", "r-kernel.ipynb"]);
    assert_eq!(code, 0, "{stdout}");
    assert_eq!(stdout, "All checks passed!\n");
}

#[test]
fn line_mapping_stays_exact_after_magics() {
    let project = Project::new();
    let hazard_cell = format!(
        "%%time\nfiles = !ls *.pt\ntorch.randn?\n%env CUDA_VISIBLE_DEVICES=0\n{}",
        TRAINING_CELL.replace(
            "    loss.backward()",
            "    %time y = x.sum()\n    !echo \"step's done\"\n    loss.backward()"
        )
    );
    project.write(
        "magics.ipynb",
        notebook(&[
            ("markdown", "# Setup"),
            (
                "code",
                "%load_ext autoreload\n%autoreload 2\n!pip install torch \\\n    torchvision\nimport torch",
            ),
            ("code", "%%bash\necho \"it's (\"\nls\n"),
            ("markdown", "Train:"),
            ("code", &hazard_cell),
        ]),
    );
    let run = project.run(&["check", "--output-format", "concise", "magics.ipynb"]);
    // Four lines of magics before the loop and two inside it: 6 + 4 + 2.
    assert_eq!(
        run.findings(),
        ["magics.ipynb:cell 5:line 12:5: TL102"],
        "{run:?}"
    );
    assert_eq!(run.code, 1);
}

#[test]
fn suppression_comments_work_in_cells() {
    let project = Project::new();
    let with_noqa =
        TRAINING_CELL.replace("losses.append(loss)", "losses.append(loss)  # noqa: TL102");
    project.write(
        "noqa.ipynb",
        notebook(&[("code", "import torch"), ("code", &with_noqa)]),
    );
    let with_ignore = TRAINING_CELL.replace(
        "losses.append(loss)",
        "losses.append(loss)  # torchlint: ignore[TL102]",
    );
    project.write(
        "ignore.ipynb",
        notebook(&[("code", "import torch"), ("code", &with_ignore)]),
    );
    project.write(
        "ignore_file.ipynb",
        notebook(&[
            ("markdown", "Known leak, kept for the tutorial."),
            ("code", "# torchlint: ignore-file\nimport torch"),
            ("code", TRAINING_CELL),
        ]),
    );
    project.write(
        "flagged.ipynb",
        notebook(&[("code", "import torch"), ("code", TRAINING_CELL)]),
    );
    let run = project.run(&["check", "--output-format", "concise", "."]);
    assert_eq!(
        run.findings(),
        ["flagged.ipynb:cell 2:line 6:5: TL102"],
        "{run:?}"
    );
}

#[test]
fn a_malformed_notebook_is_a_per_file_error_and_the_rest_is_linted() {
    let project = Project::new();
    project.write(
        "broken.ipynb",
        "{\n \"cells\": [\n  {\"cell_type\": \"code\" \"source\": []}\n ]\n}\n",
    );
    project.write("train.py", format!("import torch\n{TRAINING_CELL}\n"));
    let run = project.run(&["check", "--output-format", "concise", "."]);
    assert_eq!(run.code, 2, "{run:?}");
    assert!(
        run.stderr.contains(
            "broken.ipynb: not a valid notebook: expected `,` or `}` at line 3 column 24;"
        ),
        "{}",
        run.stderr
    );
    assert_eq!(run.findings(), ["train.py:7:5: TL102"]);
}

#[test]
fn a_syntax_error_is_reported_in_its_cell() {
    let project = Project::new();
    project.write(
        "syntax.ipynb",
        notebook(&[
            ("code", "import torch"),
            ("code", "%matplotlib inline\ndef broken(:\n    pass"),
            ("code", TRAINING_CELL),
        ]),
    );
    let run = project.run(&["check", "--output-format", "concise", "syntax.ipynb"]);
    assert_eq!(
        run.findings(),
        [
            "syntax.ipynb:cell 2:line 2:12: TL001",
            "syntax.ipynb:cell 3:line 6:5: TL102"
        ],
        "{run:?}"
    );
}

#[test]
fn stdin_is_read_as_a_notebook_when_its_name_says_so() {
    let project = Project::new();
    let text = notebook(&[("code", "import torch"), ("code", TRAINING_CELL)]);
    let run = project.run_with_stdin(
        &[
            "check",
            "--output-format",
            "concise",
            "-",
            "--stdin-filename",
            "nb/explore.ipynb",
        ],
        &text,
    );
    assert_eq!(
        run.findings(),
        ["nb/explore.ipynb:cell 2:line 6:5: TL102"],
        "{run:?}"
    );
}

#[test]
fn a_notebook_without_code_cells_has_nothing_to_report() {
    let project = Project::new();
    project.write("notes.ipynb", notebook(&[("markdown", "# Only prose")]));
    project.write(
        "no_language.ipynb",
        notebook_with_metadata(&[("code", "")], json!({})),
    );
    let run = project.run(&["check", "."]);
    assert_eq!(run.code, 0, "{run:?}");
    assert_eq!(run.stdout, "All checks passed!\n");
}

#[test]
fn odd_notebooks_never_crash_any_output_format() {
    let project = Project::new();
    let unclosed = "for step in range(3):\n    loss = torch.ones(1, requires_grad=True).sum()\n    loss.backward()\n    losses.append(loss)\nnote = '''unclosed";
    project.write(
        "odd.ipynb",
        notebook(&[
            ("code", "import torch\r\nlosses = []\r"),
            // An unclosed string swallows the cells after it, as it would in one file.
            ("code", unclosed),
            ("code", "%%bash\rls\n"),
            ("code", "x = 1 + \\"),
            ("code", "é = (\n%not_a_magic\n"),
            ("code", "\n\n\n"),
        ]),
    );
    for format in [
        "full", "concise", "json", "sarif", "github", "gitlab", "junit",
    ] {
        let run = project.run(&["check", "--output-format", format, "odd.ipynb"]);
        assert!(
            matches!(run.code, 0 | 1) && !run.stderr.contains("panicked"),
            "{format}: {run:?}"
        );
    }
}

/// Jupyter's own layout (one-space indent, lines as list items, `\u` escapes kept as written),
/// with outputs, metadata in no sorted order, a magic line and a cell whose source is one
/// string.
const FIXABLE_NOTEBOOK: &str = r##"{
 "metadata": {"kernelspec": {"name": "python3", "language": "python", "display_name": "Python 3"}},
 "cells": [
  {
   "cell_type": "markdown",
   "metadata": {},
   "source": ["# Training\n", "Keeps the loss."]
  },
  {
   "outputs": [{"output_type": "stream", "name": "stdout", "text": ["epoch 0\n"]}],
   "execution_count": 3,
   "cell_type": "code",
   "metadata": {"tags": ["train"]},
   "source": [
    "%matplotlib inline\n",
    "losses = []\n",
    "for x, y in loader:\n",
    "    loss = criterion(model(x), y)\n",
    "    loss.backward()\n",
    "    losses.append(loss)  # caf\u00e9\n",
    "print(len(losses))  # caf\u00e9"
   ]
  },
  {
   "cell_type": "code",
   "execution_count": null,
   "metadata": {},
   "outputs": [],
   "source": "state = torch.load('ckpt.pt')\nmodel.load_state_dict(state)"
  }
 ],
 "nbformat": 4,
 "nbformat_minor": 5
}
"##;

/// `--fix` makes a notebook's fixes in its cells' sources: the JSON changes only there (a
/// line list keeps its layout and the escapes of its other lines; a one-string source stays
/// one string), and the next lint finds nothing left to fix.
#[test]
fn fixes_are_made_in_the_cells_and_the_rest_of_the_notebook_is_kept_byte_for_byte() {
    let project = Project::new();
    project.write("train.ipynb", FIXABLE_NOTEBOOK);
    let diff = project.run(&[
        "check",
        "--no-cache",
        "--diff",
        "--unsafe-fixes",
        "train.ipynb",
    ]);
    assert_eq!(diff.code, 1, "{}\n{}", diff.stdout, diff.stderr);
    assert!(
        diff.stdout
            .contains("+    \"    losses.append(loss.item())  # café\\n\","),
        "{}",
        diff.stdout
    );
    let run = project.run(&[
        "check",
        "--no-cache",
        "--fix",
        "--unsafe-fixes",
        "train.ipynb",
    ]);
    assert_eq!(run.code, 0, "{}\n{}", run.stdout, run.stderr);
    let expected = FIXABLE_NOTEBOOK
        .replace(
            r#""    losses.append(loss)  # caf\u00e9\n","#,
            r#""    losses.append(loss.item())  # café\n","#,
        )
        .replace(
            r#"torch.load('ckpt.pt')"#,
            r#"torch.load('ckpt.pt', map_location=\"cpu\")"#,
        );
    assert_ne!(expected, FIXABLE_NOTEBOOK);
    assert_eq!(
        std::fs::read_to_string(project.path().join("train.ipynb")).unwrap(),
        expected
    );
    let again = project.run(&[
        "check",
        "--no-cache",
        "--fix",
        "--unsafe-fixes",
        "train.ipynb",
    ]);
    assert_eq!(again.code, 0, "{}\n{}", again.stdout, again.stderr);
    assert_eq!(
        std::fs::read_to_string(project.path().join("train.ipynb")).unwrap(),
        expected
    );
}

/// A notebook on stdin (`--stdin-filename x.ipynb`) with `--fix`: the fixed JSON on stdout, as
/// a file would be written.
#[test]
fn a_notebook_on_stdin_is_printed_fixed_in_its_cells() {
    let project = Project::new();
    let run = project.run_with_stdin(
        &[
            "check",
            "--no-cache",
            "--fix",
            "--select",
            "TL108",
            "--stdin-filename",
            "train.ipynb",
            "-",
        ],
        FIXABLE_NOTEBOOK,
    );
    assert_eq!(run.code, 0, "{}\n{}", run.stdout, run.stderr);
    assert_eq!(
        run.stdout,
        FIXABLE_NOTEBOOK.replace(
            r#"torch.load('ckpt.pt')"#,
            r#"torch.load('ckpt.pt', map_location=\"cpu\")"#,
        )
    );
}
