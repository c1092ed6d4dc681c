//! The project pass: what one file cannot tell. An evaluation helper is no-grad when every
//! caller, in any file of the run, disables grad around it.

mod common;

use common::Project;

const EVAL_HELPER: &str = "\
import torch

def evaluate(model, loader):
    model.eval()
    correct = 0
    for x, y in loader:
        correct += (model(x.cuda()).argmax(1) == y.cuda()).sum().item()
    return correct
";

fn tl101(project: &Project, args: &[&str]) -> Vec<String> {
    let mut all = vec!["check", "--output-format", "concise", "--select", "TL101"];
    all.extend_from_slice(args);
    project.run(&all).findings()
}

#[test]
fn a_helper_every_caller_wraps_in_no_grad_is_not_flagged() {
    let project = Project::new();
    project.write("pkg/metrics.py", EVAL_HELPER);
    project.write(
        "pkg/train.py",
        "import torch\nfrom .metrics import evaluate\n\ndef fit(model, loader):\n    with torch.no_grad():\n        return evaluate(model, loader)\n",
    );
    assert_eq!(tl101(&project, &[]), Vec::<String>::new());
    // Linted alone, the helper's callers are unknown: the finding stands.
    assert_eq!(
        tl101(&project, &["pkg/metrics.py"]),
        ["pkg/metrics.py:7:21: TL101"]
    );
}

#[test]
fn one_grad_enabled_caller_anywhere_keeps_the_finding() {
    let project = Project::new();
    project.write("pkg/metrics.py", EVAL_HELPER);
    project.write(
        "pkg/train.py",
        "import torch\nfrom pkg.metrics import evaluate\n\ndef fit(model, loader):\n    with torch.no_grad():\n        evaluate(model, loader)\n",
    );
    project.write(
        "pkg/report.py",
        "import pkg.metrics as metrics\n\ndef report(model, loader):\n    print(metrics.evaluate(model, loader))\n",
    );
    assert_eq!(tl101(&project, &[]), ["pkg/metrics.py:7:21: TL101"]);
}

#[test]
fn callers_are_followed_through_files() {
    // `evaluate` ← `run_eval` (no grad context of its own) ← `main` under `inference_mode`.
    let project = Project::new();
    project.write("metrics.py", EVAL_HELPER);
    project.write(
        "loops.py",
        "from metrics import evaluate\n\ndef run_eval(model, loader):\n    return evaluate(model, loader)\n",
    );
    project.write(
        "main.py",
        "import torch\nfrom loops import run_eval\n\n@torch.inference_mode()\ndef main(model, loader):\n    run_eval(model, loader)\n",
    );
    assert_eq!(tl101(&project, &[]), Vec::<String>::new());

    project.write(
        "main.py",
        "import torch\nfrom loops import run_eval\n\ndef main(model, loader):\n    run_eval(model, loader)\n\nmain(None, [])\n",
    );
    assert_eq!(tl101(&project, &[]), ["metrics.py:7:21: TL101"]);
}

#[test]
fn a_same_named_function_of_another_module_is_not_a_caller() {
    let project = Project::new();
    project.write("metrics.py", EVAL_HELPER);
    project.write(
        "other.py",
        "import torch\nfrom helpers import evaluate\n\nwith torch.no_grad():\n    evaluate(None, [])\n",
    );
    assert_eq!(tl101(&project, &[]), ["metrics.py:7:21: TL101"]);
}

#[test]
fn evaluation_hooks_of_a_framework_base_class_from_another_file() {
    // `validation_step` on a class whose base lives in another file: with no caller in the
    // project, the framework calls it (without grad).
    let project = Project::new();
    project.write(
        "base.py",
        "import lightning.pytorch as pl\n\nclass Base(pl.LightningModule):\n    pass\n",
    );
    project.write(
        "model.py",
        "import torch\nfrom base import Base\n\nclass Net(Base):\n    def __init__(self):\n        super().__init__()\n        self.fc = torch.nn.Linear(4, 2)\n        self.losses = []\n\n    def forward(self, x):\n        return self.fc(x)\n\n    def validation_step(self, batch, i):\n        self.losses.append(torch.nn.functional.mse_loss(self(batch), batch))\n",
    );
    let run = project.run(&["check", "--output-format", "concise", "--select", "TL102"]);
    assert_eq!(run.findings(), Vec::<String>::new());

    // A plain `nn.Module` base: nothing runs the hook without grad.
    project.write(
        "base.py",
        "import torch\n\nclass Base(torch.nn.Module):\n    pass\n",
    );
    project.write(
        "model.py",
        std::fs::read_to_string(project.path().join("model.py"))
            .unwrap()
            .replace("class Net(Base)", "class Net(torch.nn.Module)"),
    );
    let run = project.run(&["check", "--output-format", "concise", "--select", "TL102"]);
    assert_eq!(run.findings(), ["model.py:14:9: TL102"]);
}
