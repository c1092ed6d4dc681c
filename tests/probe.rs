//! `torchlint probe` end to end: the real binary runs real scripts under the real runner.
//!
//! Tests that need PyTorch look for it in `TORCHLINT_TEST_PYTHON`, then the project's `.venv`
//! (made by `scripts/setup-test-python`, which `.ci/run` runs), then `python3`. Without it they
//! say they were skipped and why, unless `TORCHLINT_REQUIRE_TORCH=1` (set by `.ci/run`) makes
//! that a failure. The others need only a Python 3.8+ `python3`. No GPU is needed: on a
//! machine without one the probe runs in CPU mode, which is what these tests check.

mod common;
// Not a test target of its own: it shares this file's helpers (a Python with torch).
#[path = "probe/distributed.rs"]
mod distributed;

use std::path::PathBuf;
use std::process::Command;
use std::sync::OnceLock;
use std::time::{Duration, Instant};

use common::{Project, Run};
use serde_json::Value;

/// A Python with torch (and numpy), or why there is none.
fn torch_python() -> Result<PathBuf, String> {
    static FOUND: OnceLock<Result<PathBuf, String>> = OnceLock::new();
    FOUND
        .get_or_init(|| {
            let mut candidates: Vec<PathBuf> = Vec::new();
            if let Some(python) = std::env::var_os("TORCHLINT_TEST_PYTHON") {
                candidates.push(python.into());
            }
            candidates.push(PathBuf::from(env!("CARGO_MANIFEST_DIR")).join(".venv/bin/python"));
            candidates.push("python3".into());
            for python in &candidates {
                let ok = Command::new(python)
                    .args(["-c", "import torch, numpy"])
                    .env("OMP_NUM_THREADS", "1")
                    .output()
                    .is_ok_and(|output| output.status.success());
                if ok {
                    return Ok(python.clone());
                }
            }
            Err(format!(
                "no Python with torch and numpy among {candidates:?} (run scripts/setup-test-python)"
            ))
        })
        .clone()
}

/// The Python with torch, or None after saying the test is skipped (a failure when torch is
/// required).
fn require_torch(test: &str) -> Option<PathBuf> {
    match torch_python() {
        Ok(python) => Some(python),
        Err(why) if std::env::var("TORCHLINT_REQUIRE_TORCH").as_deref() == Ok("1") => {
            panic!("{test}: TORCHLINT_REQUIRE_TORCH=1 but {why}")
        }
        Err(why) => {
            common::report_skip(test, &why);
            None
        }
    }
}

fn probe(project: &Project, python: &str, args: &[&str]) -> Run {
    let mut command = project.command();
    command
        .arg("probe")
        .args(["--python", python])
        .args(args)
        .env("OMP_NUM_THREADS", "1")
        // CPU mode on a GPU machine too: these tests check the CPU path.
        .env("CUDA_VISIBLE_DEVICES", "");
    Run::from(command.output().expect("run torchlint probe"))
}

fn json(run: &Run) -> Value {
    serde_json::from_str(&run.stdout)
        .unwrap_or_else(|error| panic!("{error}\nstdout:\n{}\nstderr:\n{}", run.stdout, run.stderr))
}

/// The verdict of the finding of `code` at `line`.
fn verdict<'a>(report: &'a Value, code: &str, line: u64) -> &'a Value {
    report["findings"]
        .as_array()
        .unwrap()
        .iter()
        .find(|f| f["code"] == code && f["line"] == line)
        .map(|f| &f["verdict"])
        .unwrap_or_else(|| panic!("no {code} finding on line {line} in {report:#}"))
}

/// An evaluation loop with grad on that keeps every batch's graph: `total += loss`.
const GRAD_ACCUMULATION: &str = "\
import sys; print('script output', flush=True)
if len(sys.argv) > 1:
    raise SystemExit(int(sys.argv[1]))
import torch
from torch import nn

model = nn.Sequential(nn.Linear(64, 256), nn.ReLU(), nn.Linear(256, 1))
criterion = nn.MSELoss()
model.eval()
total = 0
for step in range(100):
    x = torch.randn(32, 64)
    y = torch.randn(32, 1)
    loss = criterion(model(x), y)
    total += loss
print('done', float(total))
";

#[test]
fn probe_confirms_a_kept_graph_on_cpu() {
    let Some(python) = require_torch("probe_confirms_a_kept_graph_on_cpu") else {
        return;
    };
    let project = Project::new();
    project.write("eval.py", GRAD_ACCUMULATION);
    let run = probe(
        &project,
        python.to_str().unwrap(),
        &["eval.py", "--output-format", "json"],
    );
    assert_eq!(run.code, 1, "confirmed findings exit 1\n{}", run.stderr);
    let report = json(&run);
    assert!(report["device"].is_null(), "{report:#}");
    // Without a GPU the probe's footprint is its host memory alone.
    assert!(report["footprint"]["device"].is_null(), "{report:#}");
    assert!(
        report["footprint"]["host_peak_rss"].as_u64().unwrap_or(0) > 0,
        "{report:#}"
    );
    assert_eq!(report["stop"], "complete", "{report:#}");
    let accumulated = verdict(&report, "TL102", 15);
    assert_eq!(accumulated["status"], "confirmed", "{accumulated:#}");
    assert_eq!(accumulated["class"], "grows-host-graph", "{accumulated:#}");
    assert_eq!(accumulated["hits"], 30, "{accumulated:#}");
    let forward = verdict(&report, "TL101", 14);
    assert_eq!(forward["status"], "confirmed", "{forward:#}");
}

/// `--hits 5` is too few to fit a growth rate: a growth rule's line is watched until it can be
/// (the warm-up and 20 measured hits), instead of being judged `likely` early.
#[test]
fn a_growth_rule_is_watched_until_its_growth_can_be_measured() {
    let Some(python) = require_torch("a_growth_rule_is_watched_until_its_growth_can_be_measured")
    else {
        return;
    };
    let project = Project::new();
    project.write("eval.py", GRAD_ACCUMULATION);
    let run = probe(
        &project,
        python.to_str().unwrap(),
        &["eval.py", "--hits", "5", "--output-format", "json"],
    );
    let report = json(&run);
    assert_eq!(report["stop"], "complete", "{report:#}");
    let accumulated = verdict(&report, "TL102", 15);
    assert_eq!(accumulated["hits"], 25, "{accumulated:#}");
    assert_eq!(accumulated["status"], "confirmed", "{accumulated:#}");
    assert_eq!(verdict(&report, "TL101", 14)["hits"], 5, "{report:#}");
}

/// Seen on a newcomer's script: one loop's host growth credited to the evaluation forward
/// (TL101) and to the accumulator beside it (TL102), both projected to gigabytes, though the
/// forward's own graph is rebuilt every hit.
#[test]
fn one_loops_growth_is_counted_at_the_line_that_keeps_it() {
    let Some(python) = require_torch("one_loops_growth_is_counted_at_the_line_that_keeps_it")
    else {
        return;
    };
    let project = Project::new();
    // Batches of 1,024: about 2 MiB of activations kept per hit, well over the host floor.
    project.write(
        "eval.py",
        GRAD_ACCUMULATION
            .replace("torch.randn(32, 64)", "torch.randn(1024, 64)")
            .replace("torch.randn(32, 1)", "torch.randn(1024, 1)"),
    );
    let run = probe(
        &project,
        python.to_str().unwrap(),
        &["eval.py", "--output-format", "json"],
    );
    let report = json(&run);
    let accumulated = verdict(&report, "TL102", 15);
    assert_eq!(accumulated["status"], "confirmed", "{accumulated:#}");
    assert!(
        accumulated["projection"].as_str().is_some(),
        "{accumulated:#}"
    );
    let forward = verdict(&report, "TL101", 14);
    assert_eq!(forward["status"], "confirmed", "{forward:#}");
    // The loop's growth is the accumulator's: the forward costs one batch's activations.
    assert_eq!(forward["class"], "constant", "{forward:#}");
    assert!(forward["projection"].is_null(), "{forward:#}");
    assert!(
        forward["evidence"]
            .as_array()
            .unwrap()
            .iter()
            .any(|line| line
                .as_str()
                .unwrap()
                .ends_with("is counted at line 15 (TL102), which keeps what grows")),
        "{forward:#}"
    );
}

/// A script that names CUDA, probed without a GPU: its tensors stay on the CPU, and the
/// findings say the CPU's memory grows, not the GPU's.
#[test]
fn a_cpu_mode_probe_says_host_memory_where_the_script_names_cuda() {
    let Some(python) =
        require_torch("a_cpu_mode_probe_says_host_memory_where_the_script_names_cuda")
    else {
        return;
    };
    let project = Project::new();
    project.write(
        "eval.py",
        "import torch\nfrom torch import nn\n\n\
         device = \"cuda\" if torch.cuda.is_available() else \"cpu\"\n\
         model = nn.Linear(16, 16).to(device)\nmodel.eval()\ntotal = 0\n\
         for step in range(30):\n    x = torch.randn(8, 16, device=device)\n    \
         out = model(x)\n    total += out.sum()\n",
    );
    let run = probe(&project, python.to_str().unwrap(), &["eval.py"]);
    assert!(
        run.stdout
            .contains("so the memory of the CPU grows every step"),
        "{}\n{}",
        run.stdout,
        run.stderr
    );
    assert!(!run.stdout.contains("memory of the GPU"), "{}", run.stdout);
    // The linter, which cannot know where the script runs, says GPU: the file names CUDA.
    let lint = project.run(&[
        "check",
        "--no-cache",
        "--output-format",
        "concise",
        "eval.py",
    ]);
    assert!(lint.stdout.contains("memory of the GPU"), "{}", lint.stdout);
}

#[test]
fn probe_does_not_confirm_what_runtime_disproves() {
    let Some(python) = require_torch("probe_does_not_confirm_what_runtime_disproves") else {
        return;
    };
    let project = Project::new();
    // The only call of `evaluate` goes through a name lookup the linter cannot follow, and it
    // runs under no_grad: the finding is reasonable statically and wrong at run time.
    project.write(
        "eval.py",
        "\
import torch
from torch import nn


def evaluate(model, criterion):
    model.eval()
    total = 0
    for step in range(100):
        x = torch.randn(32, 64)
        y = torch.randn(32, 1)
        loss = criterion(model(x), y)
        total += loss
    return float(total)


model = nn.Sequential(nn.Linear(64, 256), nn.ReLU(), nn.Linear(256, 1))
with torch.no_grad():
    run = globals()['evaluate']
    print(run(model, nn.MSELoss()))
",
    );
    let run = probe(
        &project,
        python.to_str().unwrap(),
        &["eval.py", "--output-format", "json"],
    );
    let report = json(&run);
    assert_eq!(run.code, 0, "nothing confirmed exits 0\n{report:#}");
    let forward = verdict(&report, "TL101", 11);
    assert_eq!(forward["status"], "not-reproduced", "{forward:#}");
    assert_eq!(forward["hits"], 30, "{forward:#}");
}

#[test]
fn a_graph_retained_for_a_second_backward_is_not_confirmed() {
    let Some(python) = require_torch("a_graph_retained_for_a_second_backward_is_not_confirmed")
    else {
        return;
    };
    let project = Project::new();
    // A GAN step: the discriminator's loss retains the graph of `fake`, through which the
    // generator's loss backpropagates next. The same loop without that second backward keeps
    // each step's graph for nothing.
    let gan = "\
import torch
from torch import nn

gen, disc = nn.Linear(4, 8), nn.Linear(8, 1)
opt_g = torch.optim.SGD(gen.parameters(), lr=0.01)
opt_d = torch.optim.SGD(disc.parameters(), lr=0.01)
for step in range(40):
    fake = gen(torch.randn(16, 4))
    opt_d.zero_grad()
    d_loss = disc(fake).mean() - disc(torch.randn(16, 8)).mean()
    d_loss.backward(retain_graph=True)
    opt_d.step()
    opt_g.zero_grad()
    g_loss = -disc(fake).mean()
    g_loss.backward()
    opt_g.step()
";
    project.write("gan.py", gan);
    project.write(
        "plain.py",
        gan.replace(
            "-disc(fake).mean()",
            "-disc(gen(torch.randn(16, 4))).mean()",
        ),
    );
    let python = python.to_str().unwrap();
    let judged = |script: &str| {
        let run = probe(
            &project,
            python,
            &[script, "--watch", "TL107:11", "--output-format", "json"],
        );
        verdict(&json(&run), "TL107", 11).clone()
    };
    let shared = judged("gan.py");
    assert_eq!(shared["status"], "not-reproduced", "{shared:#}");
    assert!(
        shared["summary"]
            .as_str()
            .unwrap()
            .starts_with("a second backward ran through the retained graph"),
        "{shared:#}"
    );
    let kept = judged("plain.py");
    assert_eq!(kept["status"], "confirmed", "{kept:#}");
}

#[test]
fn a_create_graph_cycle_is_confirmed_where_the_gradients_keep_their_graphs() {
    let Some(python) =
        require_torch("a_create_graph_cycle_is_confirmed_where_the_gradients_keep_their_graphs")
    else {
        return;
    };
    let project = Project::new();
    // Parameters updated by hand and the gradients never reset: each backward adds to
    // gradients that hold the last one's graph. `zero_grad(set_to_none=False)` detaches them
    // first, so the same loop with it keeps nothing (watched by hand: the rule passes it).
    let kept = "\
import torch
from torch import nn

model = nn.Sequential(nn.Linear(256, 256), nn.Tanh(), nn.Linear(256, 1))
opt = torch.optim.SGD(model.parameters(), lr=0.001)
for step in range(60):
    loss = model(torch.randn(512, 256)).pow(2).mean()
    loss.backward(create_graph=True)
    with torch.no_grad():
        for p in model.parameters():
            p -= 0.001 * p.grad
";
    project.write("kept.py", kept);
    project.write(
        "detached.py",
        kept.replace(
            "    loss = model",
            "    opt.zero_grad(set_to_none=False)\n    loss = model",
        ),
    );
    let python = python.to_str().unwrap();
    let run = probe(&project, python, &["kept.py", "--output-format", "json"]);
    let confirmed = verdict(&json(&run), "TL110", 8).clone();
    assert_eq!(confirmed["status"], "confirmed", "{confirmed:#}");
    assert_eq!(confirmed["class"], "grows-host", "{confirmed:#}");
    let evidence = confirmed["evidence"].to_string();
    assert!(
        evidence.contains(
            "gradients still holding the last backward's graph as the line started on 29/29 hits"
        ),
        "{confirmed:#}"
    );
    let run = probe(
        &project,
        python,
        &[
            "detached.py",
            "--watch",
            "TL110:9",
            "--output-format",
            "json",
        ],
    );
    let detached = verdict(&json(&run), "TL110", 9).clone();
    assert_eq!(detached["status"], "not-reproduced", "{detached:#}");
    assert!(
        detached["summary"]
            .as_str()
            .unwrap()
            .starts_with("the gradients held no graph when the next backward started"),
        "{detached:#}"
    );
}

#[test]
fn a_copy_made_on_every_step_is_confirmed_and_one_made_once_is_not() {
    let Some(python) =
        require_torch("a_copy_made_on_every_step_is_confirmed_and_one_made_once_is_not")
    else {
        return;
    };
    let project = Project::new();
    // A teacher copied from the model and an optimizer built on every batch; the same loop
    // with the optimizer built once and the teacher copied on the first step only, the line
    // giving back the same teacher after it (watched by hand: the rule passes it).
    let every = "\
import copy
import torch
from torch import nn

model = nn.Sequential(nn.Linear(64, 256), nn.ReLU(), nn.Linear(256, 1))
for step in range(40):
    teacher = copy.deepcopy(model)
    opt = torch.optim.Adam(model.parameters(), lr=1e-3)
    loss = (model(torch.randn(32, 64)) - teacher(torch.randn(32, 64))).pow(2).mean()
    opt.zero_grad()
    loss.backward()
    opt.step()
";
    project.write("every.py", every);
    project.write(
        "once.py",
        every
            .replace(
                "    teacher = copy.deepcopy(model)\n",
                "    teacher = copy.deepcopy(model) if step == 0 else teacher\n",
            )
            .replace(
                "for step in range(40):",
                "opt = torch.optim.Adam(model.parameters(), lr=1e-3)\nfor step in range(40):",
            )
            .replace(
                "    opt = torch.optim.Adam(model.parameters(), lr=1e-3)\n    loss",
                "    loss",
            ),
    );
    let python = python.to_str().unwrap();
    let run = probe(&project, python, &["every.py", "--output-format", "json"]);
    let report = json(&run);
    let copied = verdict(&report, "TL113", 7);
    assert_eq!(copied["status"], "confirmed", "{copied:#}");
    let summary = copied["summary"].as_str().unwrap();
    // 64×256 + 256 + 256 + 1 float32 parameters: 66.0 KiB.
    assert!(
        summary.starts_with("a new copy (66.0 KiB on cpu) on"),
        "{copied:#}"
    );
    let rebuilt = verdict(&report, "TL113", 8);
    assert_eq!(rebuilt["status"], "confirmed", "{rebuilt:#}");
    assert!(
        rebuilt["summary"]
            .as_str()
            .unwrap()
            .starts_with("a new optimizer on"),
        "{rebuilt:#}"
    );
    let run = probe(
        &project,
        python,
        &["once.py", "--watch", "TL113:8", "--output-format", "json"],
    );
    let kept = verdict(&json(&run), "TL113", 8).clone();
    assert_eq!(kept["status"], "not-reproduced", "{kept:#}");
}

#[test]
fn a_function_compiled_anew_on_every_step_is_confirmed_and_the_same_module_is_not() {
    let Some(python) = require_torch(
        "a_function_compiled_anew_on_every_step_is_confirmed_and_the_same_module_is_not",
    ) else {
        return;
    };
    let project = Project::new();
    // A closure compiled on every batch, a function decorated with `@torch.compile` on every
    // batch, and the model itself compiled again on every batch (dynamo's cache answers:
    // watched by hand, as the rule passes it). The eager backend keeps the run short.
    let closure = "\
import torch
from torch import nn

model = nn.Sequential(nn.Linear(16, 32), nn.ReLU(), nn.Linear(32, 1))
opt = torch.optim.SGD(model.parameters(), lr=1e-3)
for step in range(40):
    scale = 1.0 + step / 40
    fn = torch.compile(lambda t: model(t) * scale, backend=\"eager\")
    loss = fn(torch.randn(8, 16)).pow(2).mean()
    opt.zero_grad()
    loss.backward()
    opt.step()
";
    project.write("closure.py", closure);
    project.write(
        "decorated.py",
        closure.replace(
            "    fn = torch.compile(lambda t: model(t) * scale, backend=\"eager\")\n",
            "    @torch.compile(backend=\"eager\")\n    def fn(t):\n        return model(t) * scale\n\n",
        ),
    );
    project.write(
        "same.py",
        closure.replace("lambda t: model(t) * scale, backend=", "model, backend="),
    );
    let python = python.to_str().unwrap();
    for (script, line) in [("closure.py", 8), ("decorated.py", 8)] {
        let run = probe(&project, python, &[script, "--output-format", "json"]);
        let compiled = verdict(&json(&run), "TL203", line).clone();
        assert_eq!(compiled["status"], "confirmed", "{script}: {compiled:#}");
        assert!(
            compiled["summary"]
                .as_str()
                .unwrap()
                .starts_with("a new function compiled on"),
            "{script}: {compiled:#}"
        );
    }
    let run = probe(
        &project,
        python,
        &["same.py", "--watch", "TL203:8", "--output-format", "json"],
    );
    let same = verdict(&json(&run), "TL203", 8).clone();
    assert_eq!(same["status"], "not-reproduced", "{same:#}");
}

#[test]
fn the_precision_of_a_training_loops_forward_is_read_without_a_gpu() {
    let Some(python) =
        require_torch("the_precision_of_a_training_loops_forward_is_read_without_a_gpu")
    else {
        return;
    };
    let project = Project::new();
    // TL301 is a CUDA rule (the linter leaves it out of a run without a GPU): the loop is
    // watched by hand, and the runner's hooks find its forward as the first module with
    // parameters called with grad on. Without a GPU the verdict cannot confirm it, but says
    // what the forward ran in: float32, and bfloat16 for the same loop with a bfloat16 model.
    let float32 = "\
import torch
from torch import nn

device = \"cuda\" if torch.cuda.is_available() else \"cpu\"
model = nn.Sequential(nn.Linear(64, 256), nn.ReLU(), nn.Linear(256, 10)).to(device)
opt = torch.optim.SGD(model.parameters(), lr=0.01)
for step in range(40):
    x = torch.randn(32, 64, device=device, dtype=next(model.parameters()).dtype)
    loss = nn.functional.cross_entropy(model(x), torch.randint(0, 10, (32,), device=device))
    opt.zero_grad()
    loss.backward()
    opt.step()
";
    project.write("float32.py", float32);
    project.write(
        "bfloat16.py",
        float32.replace(".to(device)", ".to(device, dtype=torch.bfloat16)"),
    );
    let python = python.to_str().unwrap();
    for (script, dtype) in [("float32.py", "float32"), ("bfloat16.py", "bfloat16")] {
        let run = probe(
            &project,
            python,
            &[script, "--watch", "TL301:7", "--output-format", "json"],
        );
        let verdict = verdict(&json(&run), "TL301", 7).clone();
        assert_eq!(verdict["status"], "not-reproduced", "{script}: {verdict:#}");
        assert!(
            verdict["summary"]
                .as_str()
                .unwrap()
                .starts_with("ran without a GPU"),
            "{script}: {verdict:#}"
        );
        let evidence = verdict["evidence"].to_string();
        for line in [
            "a forward of `Sequential` seen on 30/30 iterations".to_owned(),
            "autocast for CUDA off at 30/30 forwards".to_owned(),
            format!("parameters: mostly {dtype}, on cpu, "),
            format!("output dtype: {dtype}"),
            "grad enabled at 30/30 forwards".to_owned(),
        ] {
            assert!(evidence.contains(&line), "{script}: {line}: {verdict:#}");
        }
    }
}

#[test]
fn probe_confirms_float64_batches() {
    let Some(python) = require_torch("probe_confirms_float64_batches") else {
        return;
    };
    let project = Project::new();
    project.write(
        "train.py",
        "\
import numpy as np
import torch
from torch import nn

model = nn.Linear(8, 1).double()
optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
for step in range(50):
    x = torch.from_numpy(np.random.rand(16, 8))
    loss = model(x).pow(2).mean()
    optimizer.zero_grad()
    loss.backward()
    optimizer.step()
",
    );
    let run = probe(
        &project,
        python.to_str().unwrap(),
        &["train.py", "--output-format", "json"],
    );
    let report = json(&run);
    let codes: Vec<&str> = report["findings"]
        .as_array()
        .unwrap()
        .iter()
        .filter_map(|f| f["code"].as_str())
        .collect();
    assert!(codes.contains(&"TL105"), "{report:#}");
    for finding in report["findings"].as_array().unwrap() {
        if finding["code"] == "TL105" {
            assert_eq!(finding["verdict"]["status"], "confirmed", "{finding:#}");
        }
    }
}

#[test]
fn probe_full_output_shows_evidence_and_writes_the_html_report() {
    let Some(python) = require_torch("probe_full_output_shows_evidence_and_writes_the_html_report")
    else {
        return;
    };
    let project = Project::new();
    project.write("eval.py", GRAD_ACCUMULATION);
    let run = probe(
        &project,
        python.to_str().unwrap(),
        &["eval.py", "--report", "probe.html", "--color", "never"],
    );
    assert_eq!(run.code, 1, "{}\n{}", run.stdout, run.stderr);
    assert!(
        run.stdout.contains("error[TL102]: confirmed: "),
        "{}",
        run.stdout
    );
    assert!(run.stdout.contains("= probe: "), "{}", run.stdout);
    assert!(run.stdout.contains("= evidence: "), "{}", run.stdout);
    assert!(
        run.stdout.contains("device: none, CPU mode"),
        "{}",
        run.stdout
    );
    assert!(
        regex::Regex::new(r"probe's own footprint: [0-9.]+ MiB peak RSS on the host")
            .unwrap()
            .is_match(&run.stdout),
        "{}",
        run.stdout
    );
    assert!(
        run.stdout.contains("script output"),
        "the script's own output reaches stdout"
    );
    let page = std::fs::read_to_string(project.path().join("probe.html")).expect("the report");
    assert!(page.starts_with("<!DOCTYPE html>") || page.starts_with("<!doctype html>"));
    assert!(page.contains("TL102"), "{page}");
    // What was run, with what, and when.
    for row in [
        "<dt>Command</dt><dd>python eval.py</dd>",
        "<dt>torchlint</dt>",
        "<dt>PyTorch</dt><dd>2.",
        "<dt>Started</dt><dd>20",
        "<dt>Probe&#39;s own footprint</dt><dd>",
    ] {
        assert!(page.contains(row), "{row}: {page}");
    }
    // A hit's tooltip says when, and the memory then and since the previous hit.
    let tooltip = regex::Regex::new(
        r"<title>TL102 line 15, hit 2: [0-9.]+ s, host RSS [^<]+ \([+-][^<]+ since hit 1\)</title>",
    )
    .unwrap();
    assert!(tooltip.is_match(&page), "{page}");
    // Each finding shows its line and its fix.
    assert!(page.contains("<pre class=\"source\">   15 | "), "{page}");
    assert!(
        page.contains("<p class=\"fix\">Fix: accumulate a number"),
        "{page}"
    );
    // Self-contained: nothing is fetched (the SVG namespace is a name, not a request).
    for reference in ["src=\"http", "href=\"http", "url(http", "@import", "<link"] {
        assert!(!page.contains(reference), "the page loads `{reference}`");
    }
}

#[test]
fn probe_reports_the_scripts_exit_status_and_unreached_lines() {
    let project = Project::new();
    project.write("eval.py", GRAD_ACCUMULATION);
    // Exits with 3 before torch is even imported: nothing is reached (no torch needed).
    let run = probe(
        &project,
        "python3",
        &["eval.py", "--output-format", "json", "--", "3"],
    );
    let report = json(&run);
    // A CI step probing a script that fails fails too, with the script's status.
    assert_eq!(run.code, 3, "{report:#}");
    assert!(
        run.stderr
            .contains("torchlint probe: the script failed (exit status 3); the probe exits with 3"),
        "{run:#?}"
    );
    assert_eq!(report["stop"], "script-exited", "{report:#}");
    assert_eq!(report["exit"]["status"], 3, "{report:#}");
    assert_eq!(verdict(&report, "TL102", 15)["status"], "not-reached");
}

/// An out-of-memory error raised two frames below a flagged line (simulated: CPU torch raises
/// the same `torch.OutOfMemoryError` a GPU would).
const OUT_OF_MEMORY: &str = "\
import torch
from torch import nn

OutOfMemory = getattr(torch, 'OutOfMemoryError', None) or torch.cuda.OutOfMemoryError


def checked(value, step):
    if step == 3:
        raise OutOfMemory('CUDA out of memory. Tried to allocate 2.00 GiB. GPU 0 has a total capacity of 8.00 GiB of which 6.00 GiB is free. 3.00 GiB allowed; Of the allocated memory 2.50 GiB is allocated by PyTorch')
    return value


model = nn.Linear(4, 1)
total = 0
for step in range(10):
    loss = model(torch.randn(2, 4)).sum()
    total += checked(loss, step)
print(float(total))
";

#[test]
fn probe_reads_an_out_of_memory_error_where_it_happened() {
    let Some(python) = require_torch("probe_reads_an_out_of_memory_error_where_it_happened") else {
        return;
    };
    let project = Project::new();
    project.write("oom.py", OUT_OF_MEMORY);
    let run = probe(
        &project,
        python.to_str().unwrap(),
        &["oom.py", "--output-format", "json"],
    );
    assert_eq!(run.code, 1, "the script's own status\n{}", run.stderr);
    let report = json(&run);
    let oom = &report["out_of_memory"];
    assert_eq!(oom["requested"], 2u64 << 30, "{report:#}");
    assert_eq!(
        oom["stack"][0]["line"], 9,
        "the line that asked: {report:#}"
    );
    assert_eq!(oom["stack"][1]["line"], 17, "{report:#}");
    assert!(
        oom["message"]
            .as_str()
            .is_some_and(|m| m.starts_with("CUDA out of memory. Tried to allocate 2.00 GiB")),
        "{report:#}"
    );
    assert_eq!(
        oom["findings_on_stack"],
        serde_json::json!(["TL102:17"]),
        "{report:#}"
    );
    assert_eq!(
        oom["allowed"],
        3u64 << 30,
        "the script's own cap: {report:#}"
    );
    // The budget at the error: the model's 5 parameters (20 bytes as float32: weight and bias).
    assert_eq!(oom["budget"]["at"], "out_of_memory", "{report:#}");
    assert_eq!(oom["budget"]["parameters"], 20, "{report:#}");
    let text = probe(
        &project,
        python.to_str().unwrap(),
        &["oom.py", "--color", "never", "--report", "oom.html"],
    );
    // The HTML timeline marks the moment, its title the post-mortem.
    let page = std::fs::read_to_string(project.path().join("oom.html")).unwrap();
    assert!(
        page.contains("<line class=\"out-of-memory\"")
            && page.contains("<title>out of memory: oom.py:9 asked for 2.0 GiB"),
        "{page}"
    );
    assert!(
        text.stdout.contains(
            "out of memory: oom.py:9 asked for 2.0 GiB; then the process capped at 3.0 GiB (set_per_process_memory_fraction)\n    findings on its stack: TL102:17"
        ),
        "{}",
        text.stdout
    );
}

#[test]
fn probe_until_exit_lets_the_script_finish_and_says_where_a_cap_did_not_apply() {
    let Some(python) =
        require_torch("probe_until_exit_lets_the_script_finish_and_says_where_a_cap_did_not_apply")
    else {
        return;
    };
    let project = Project::new();
    project.write(
        "eval.py",
        GRAD_ACCUMULATION.replace(
            "print('done'",
            "open('finished', 'w').write('yes'); print('done'",
        ),
    );
    let python = python.to_str().unwrap();
    // By default the probe stops the script once the lines have their hits (30 of 100 steps).
    let run = probe(&project, python, &["eval.py", "--output-format", "json"]);
    assert_eq!(json(&run)["stop"], "complete", "{}", run.stderr);
    assert!(!project.path().join("finished").exists());

    let run = probe(
        &project,
        python,
        &[
            "eval.py",
            "--until-exit",
            "--max-memory",
            "1.5",
            "--output-format",
            "json",
        ],
    );
    assert_eq!(run.code, 1, "confirmed findings exit 1\n{}", run.stderr);
    let report = json(&run);
    assert_eq!(report["stop"], "script-exited", "{report:#}");
    assert!(project.path().join("finished").exists(), "ran to its end");
    let accumulated = verdict(&report, "TL102", 15);
    assert_eq!(accumulated["status"], "confirmed", "{accumulated:#}");
    assert_eq!(accumulated["hits"], 30, "{accumulated:#}");
    assert_eq!(report["max_memory"], 3u64 << 29, "{report:#}");

    // On the CPU there is no allocator to cap: the report says the cap never applied.
    let text = probe(
        &project,
        python,
        &[
            "eval.py",
            "--until-exit",
            "--max-memory",
            "1.5",
            "--color",
            "never",
        ],
    );
    assert!(
        text.stdout.contains(
            "memory cap: 1.5 GiB asked (--max-memory), not in effect: the script never initialised CUDA"
        ),
        "{}",
        text.stdout
    );
    assert!(
        text.stdout.contains("run: the script ended by itself"),
        "{}",
        text.stdout
    );
}

/// One model trained by the optimizer the first argument names; the hazard keeps the watch on.
const OPTIMIZER_STATE: &str = "\
import sys
import torch
from torch import nn

model = nn.Sequential(nn.Linear(256, 512), nn.ReLU(), nn.Linear(512, 256))
if sys.argv[1] == 'adamw':
    opt = torch.optim.AdamW(model.parameters())
else:
    opt = torch.optim.SGD(model.parameters(), lr=0.01, momentum=0.9)
losses = []
for step in range(40):
    loss = model(torch.randn(8, 256)).pow(2).mean()
    opt.zero_grad()
    loss.backward()
    opt.step()
    losses.append(loss)
";

#[test]
fn probe_budget_tells_adamw_state_from_sgd_momentum() {
    let Some(python) = require_torch("probe_budget_tells_adamw_state_from_sgd_momentum") else {
        return;
    };
    let project = Project::new();
    project.write("train.py", OPTIMIZER_STATE);
    let python = python.to_str().unwrap();
    // 256 × 512 + 512 + 512 × 256 + 256 float32 parameters.
    let parameters: u64 = (256 * 512 + 512 + 512 * 256 + 256) * 4;
    let budget = |optimizer: &str| {
        let run = probe(
            &project,
            python,
            &["train.py", "--output-format", "json", "--", optimizer],
        );
        let report = json(&run);
        assert_eq!(report["budget"]["device"], false, "CPU mode: {report:#}");
        assert_eq!(report["budget"]["parameters"], parameters, "{report:#}");
        assert_eq!(report["budget"]["gradients"], parameters, "{report:#}");
        report["budget"]["optimizers"][0].clone()
    };
    let adamw = budget("adamw");
    assert_eq!(adamw["class"], "AdamW", "{adamw:#}");
    // Two moments per parameter, and a step count per tensor (4 one-element tensors).
    assert_eq!(adamw["bytes"], 2 * parameters + 4 * 4, "{adamw:#}");
    let sgd = budget("sgd");
    assert_eq!(sgd["class"], "SGD", "{sgd:#}");
    assert_eq!(
        sgd["bytes"], parameters,
        "one momentum buffer per parameter: {sgd:#}"
    );

    let text = probe(
        &project,
        python,
        &["train.py", "--color", "never", "--", "adamw"],
    );
    // Under the verdicts, as a table of its own.
    let table = text
        .stdout
        .find("\n\nhost memory of the model and optimizer once the watched lines had their hits (CPU mode)\n  parameters ");
    let verdicts = text.stdout.find("verdict          line");
    assert!(table.is_some() && verdicts < table, "{}", text.stdout);
    assert!(
        text.stdout.contains("\n  optimizer state (AdamW)   "),
        "{}",
        text.stdout
    );
}

#[test]
fn probe_reports_the_scripts_traceback() {
    let project = Project::new();
    project.write(
        "train.py",
        GRAD_ACCUMULATION.replace(
            "    raise SystemExit(int(sys.argv[1]))",
            "    raise RuntimeError('boom ' + sys.argv[1])",
        ),
    );
    let run = probe(
        &project,
        "python3",
        &["train.py", "--output-format", "json", "--", "7"],
    );
    let report = json(&run);
    assert_eq!(report["exit"]["status"], 1, "{report:#}");
    let traceback = report["exit"]["traceback"].as_str().unwrap_or_default();
    assert!(traceback.contains("RuntimeError: boom 7"), "{traceback}");
    assert!(
        !traceback.contains("torchlint_probe_runner"),
        "runner frames are hidden: {traceback}"
    );
    assert!(
        run.stderr.contains("RuntimeError: boom 7"),
        "python's own report: {}",
        run.stderr
    );
}

/// A script that starts a child process in its group, records its pid in `child.pid` and
/// waits, before the hazards of `GRAD_ACCUMULATION` (which it never reaches).
fn waiting_script() -> String {
    format!(
        "import subprocess, time\nchild = subprocess.Popen(['sleep', '300'])\nopen('child.pid', 'w').write(str(child.pid))\ntime.sleep(300)\n{GRAD_ACCUMULATION}"
    )
}

/// The process whose pid the file holds is gone, or a zombie waiting for a reaper that is not
/// ours.
fn assert_child_ended(pid_file: &std::path::Path) {
    let pid = std::fs::read_to_string(pid_file).expect("child pid");
    let stat = std::fs::read_to_string(format!("/proc/{}/stat", pid.trim())).unwrap_or_default();
    let state = stat
        .rsplit(") ")
        .next()
        .and_then(|rest| rest.chars().next());
    assert!(
        stat.is_empty() || state == Some('Z'),
        "the child still runs: {stat}"
    );
}

#[test]
fn probe_timeout_ends_the_whole_process_group() {
    let project = Project::new();
    // A child process in the script's group, then a wait the timeout cuts short.
    project.write("eval.py", waiting_script());
    let started = Instant::now();
    let run = probe(
        &project,
        "python3",
        &["eval.py", "--output-format", "json", "--timeout", "3"],
    );
    assert!(
        started.elapsed() < Duration::from_secs(30),
        "took {:?}",
        started.elapsed()
    );
    let report = json(&run);
    assert_eq!(report["stop"], "timeout", "{report:#}");
    assert_child_ended(&project.path().join("child.pid"));
}

#[test]
fn probe_without_watchable_findings_still_runs_the_script() {
    let project = Project::new();
    project.write("clean.py", "open('ran', 'w').write('yes')\n");
    let run = probe(&project, "python3", &["clean.py"]);
    assert_eq!(run.code, 0, "{}", run.stderr);
    assert!(run.stdout.contains("No finding to watch"), "{}", run.stdout);
    assert!(
        run.stdout.contains("the script ended by itself"),
        "{}",
        run.stdout
    );
    assert!(
        project.path().join("ran").exists(),
        "the script runs for the run's numbers"
    );
    // Its exit status follows the script's, as with findings.
    project.write("fails.py", "raise SystemExit(3)\n");
    let run = probe(&project, "python3", &["fails.py"]);
    assert_eq!(run.code, 3, "{}\n{}", run.stdout, run.stderr);
}

#[test]
fn probe_rejects_a_missing_interpreter_and_bad_options() {
    let project = Project::new();
    project.write("eval.py", GRAD_ACCUMULATION);
    let run = probe(&project, "/nonexistent/python", &["eval.py"]);
    assert_eq!(run.code, 2, "{}", run.stderr);
    assert!(
        run.stderr.contains("cannot run `/nonexistent/python`"),
        "{}",
        run.stderr
    );
    let run = probe(&project, "python3", &["missing.py"]);
    assert_eq!(run.code, 2);
    assert!(
        run.stderr.contains("missing.py: cannot read the script"),
        "{}",
        run.stderr
    );
    let run = probe(&project, "python3", &["eval.py", "--hits", "0"]);
    assert_eq!(run.code, 2);
    for cap in ["0", "-1", "nan"] {
        let option = format!("--max-memory={cap}");
        let run = probe(&project, "python3", &["eval.py", &option]);
        assert_eq!(run.code, 2, "--max-memory {cap}");
        assert!(
            run.stderr
                .contains("--max-memory must be a positive number of GiB"),
            "{}",
            run.stderr
        );
    }
    let run = probe(&project, "python3", &["eval.py", "--step-line", "999"]);
    assert_eq!(run.code, 2);
    assert!(
        run.stderr
            .contains("--step-line 999: the script has no line 999"),
        "{}",
        run.stderr
    );
    let run = probe(&project, "python3", &["eval.py", "--watch", "TL102:999"]);
    assert_eq!(run.code, 2);
    assert!(
        run.stderr.contains("the script has no line 999"),
        "{}",
        run.stderr
    );
}

#[test]
fn probe_ctrl_c_ends_the_script_and_still_reports() {
    // Also when torchlint starts with SIGINT ignored, as a background job of a shell without
    // job control does (`cargo test &` in a script): the probe's handler must still run.
    for inherited_ignore in [false, true] {
        ctrl_c_ends_the_script_and_still_reports(inherited_ignore);
    }
}

fn ctrl_c_ends_the_script_and_still_reports(inherited_ignore: bool) {
    let project = Project::new();
    project.write("eval.py", waiting_script());
    let mut command = project.command();
    command
        .args([
            "probe",
            "--python",
            "python3",
            "eval.py",
            "--output-format",
            "json",
        ])
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped());
    if inherited_ignore {
        use std::os::unix::process::CommandExt;
        // SAFETY: signal(2) is async-signal-safe; it runs in the child before exec.
        unsafe {
            command.pre_exec(|| {
                libc::signal(libc::SIGINT, libc::SIG_IGN);
                Ok(())
            });
        }
    }
    let child = command.spawn().expect("spawn torchlint probe");
    let pid_file = project.path().join("child.pid");
    let deadline = Instant::now() + Duration::from_secs(20);
    while !pid_file.exists() && Instant::now() < deadline {
        std::thread::sleep(Duration::from_millis(50));
    }
    assert!(pid_file.exists(), "the script did not start");
    // What the terminal sends on Ctrl-C (to torchlint only: the script has its own group).
    // SAFETY: sends a signal to the child we spawned.
    unsafe {
        libc::kill(child.id() as libc::pid_t, libc::SIGINT);
    }
    let started = Instant::now();
    let run = Run::from(child.wait_with_output().expect("wait for torchlint"));
    assert!(
        started.elapsed() < Duration::from_secs(60),
        "SIGINT ignored ({inherited_ignore}): the probe waited for the script"
    );
    let report = json(&run);
    assert_eq!(report["stop"], "interrupted", "{report:#}");
    assert_eq!(verdict(&report, "TL102", 19)["status"], "not-reached");
    assert_child_ended(&pid_file);
}
