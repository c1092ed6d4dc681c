//! The project pass: what one file cannot tell. An evaluation helper is no-grad when every
//! caller, in any file of the run, disables grad around it.

mod common;

use common::{EVAL_HELPER, Project};

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
fn a_method_calling_a_same_named_method_of_another_object_does_not_decide_itself() {
    // `Suite.evaluate` calls `self.scorer.evaluate(...)`: a call of its own name, which says
    // nothing about how `Suite.evaluate` is entered (nobody calls it: with grad).
    let project = Project::new();
    project.write(
        "scorer.py",
        "import torch\n\nclass Scorer:\n    def evaluate(self, model, loader):\n        model.eval()\n        return [model(x.cuda()).argmax(1).tolist() for x in loader]\n",
    );
    let suite = |body: &str| {
        format!("import torch\n\nclass Suite:\n    def evaluate(self, model, loader):\n{body}")
    };
    project.write(
        "suite.py",
        suite("        return self.scorer.evaluate(model, loader)\n"),
    );
    assert_eq!(tl101(&project, &[]), ["scorer.py:6:17: TL101"]);
    project.write(
        "suite.py",
        suite("        with torch.no_grad():\n            return self.scorer.evaluate(model, loader)\n"),
    );
    assert_eq!(tl101(&project, &[]), Vec::<String>::new());
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

#[test]
fn outputs_kept_by_an_evaluation_hook_of_a_framework_base_class_from_another_file() {
    // Lightning runs `validation_step` without grad, also on a class whose `LightningModule`
    // base is another file's: what the hook keeps holds device memory, not a graph.
    let project = Project::new();
    project.write(
        "base.py",
        "import lightning.pytorch as pl\n\nclass Base(pl.LightningModule):\n    pass\n",
    );
    project.write(
        "model.py",
        "import torch\nfrom base import Base\n\nclass Net(Base):\n    def __init__(self, device=\"cuda\"):\n        super().__init__()\n        self.fc = torch.nn.Linear(4, 2, device=device)\n        self.outputs = []\n\n    def forward(self, x):\n        return self.fc(x)\n\n    def validation_step(self, batch, i):\n        self.outputs.append(self(batch))\n",
    );
    assert_eq!(
        findings(&project, "TL102,TL104", &[]),
        ["model.py:14:9: TL104"]
    );
}

#[test]
fn a_subclass_of_a_base_from_a_file_that_names_the_accelerator_runs_there() {
    // The subclass's file names no device: its base's file (a `LightningModule`) does, and the
    // framework hands the hook batches on the accelerator.
    let project = Project::new();
    project.write(
        "base.py",
        "import lightning.pytorch as pl\n\nclass Base(pl.LightningModule):\n    pass\n",
    );
    project.write(
        "model.py",
        "from base import Base\n\nclass Net(Base):\n    def __init__(self):\n        super().__init__()\n        self.batches = []\n\n    def training_step(self, batch, i):\n        self.batches.append(batch)\n",
    );
    assert_eq!(findings(&project, "TL104", &[]), ["model.py:9:9: TL104"]);

    // A base from host code: nothing says where the batches are.
    project.write(
        "base.py",
        "import torch\n\nclass Base(torch.nn.Module):\n    pass\n",
    );
    assert_eq!(findings(&project, "TL104", &[]), Vec::<String>::new());
}

#[test]
fn a_model_in_a_file_that_names_no_device_runs_where_the_run_puts_it() {
    // A feature extractor of a package: the model it is given comes from the training script,
    // which moves it to the GPU; the extractor's file names no device. The branch that moves
    // the outputs to the host is taken only when writing to a file.
    let project = Project::new();
    project.write(
        "reid/features.py",
        "def extract_features(model, loader, output_file=None):\n    model.eval()\n    features = {}\n    for images, names in loader:\n        outputs = model(images).detach()\n        if output_file is not None:\n            outputs = outputs.cpu().numpy()\n        for name, output in zip(names, outputs):\n            features[name] = output\n    return features\n",
    );
    project.write(
        "reid/train.py",
        "import torch\nfrom reid.features import extract_features\n\ndef main(net, loader):\n    net = torch.nn.DataParallel(net).cuda()\n    return extract_features(net, loader)\n",
    );
    assert_eq!(
        findings(&project, "TL104", &[]),
        ["reid/features.py:9:13: TL104"]
    );

    // No file of the run names CUDA, a device or an accelerator: host code.
    project.write(
        "reid/train.py",
        "from reid.features import extract_features\n\ndef main(net, loader):\n    return extract_features(net, loader)\n",
    );
    assert_eq!(findings(&project, "TL104", &[]), Vec::<String>::new());
}

#[test]
fn a_model_a_base_class_of_another_file_keeps_is_known_through_a_package_init() {
    // `Sampler` (re-exported by the package's `__init__.py` with a relative star import) puts
    // the denoiser it is given in eval mode; the subclass in another file runs it with grad on.
    let project = Project::new();
    project.write("morered/__init__.py", "");
    project.write(
        "morered/sampling/__init__.py",
        "from .base import *\nfrom .joint import *\n",
    );
    project.write(
        "morered/sampling/base.py",
        "import torch\n\n\nclass Sampler:\n    def __init__(self, denoiser, device):\n        self.denoiser = denoiser.to(device).eval()\n",
    );
    project.write(
        "morered/sampling/joint.py",
        "from morered.sampling import Sampler\n\n\nclass JointSampler(Sampler):\n    def inference_step(self, inputs):\n        return self.denoiser(inputs)[\"eps\"].detach()\n",
    );
    assert_eq!(
        findings(&project, "TL101", &[]),
        ["morered/sampling/joint.py:6:16: TL101"]
    );
}

#[test]
fn a_model_kept_by_a_wrapper_class_of_another_file_runs_on_its_device() {
    // `CLIPModel` is no module: it keeps a pretrained model on its device, and the embedding
    // loop of another file (which names no device) runs that model through the wrapper.
    let project = Project::new();
    project.write("src/__init__.py", "");
    project.write(
        "src/models/__init__.py",
        "from .clip_model import CLIPModel\n",
    );
    project.write(
        "src/models/clip_model.py",
        "import torch\nfrom transformers import CLIPModel as HFClip\n\n\nclass CLIPModel:\n    def __init__(self, name):\n        self.device = \"cuda\" if torch.cuda.is_available() else \"cpu\"\n        self.model = HFClip.from_pretrained(name).to(self.device)\n",
    );
    project.write(
        "src/embed.py",
        "import torch\nfrom torch.utils.data import DataLoader\nfrom src.models import CLIPModel\n\n\ndef build(model: CLIPModel, dataset):\n    embeddings = []\n    with torch.inference_mode():\n        for batch in DataLoader(dataset):\n            features = model.model.get_image_features(pixel_values=batch[\"pixel_values\"])\n            embeddings.append(features)\n    return embeddings\n",
    );
    assert_eq!(
        findings(&project, "TL104", &[]),
        ["src/embed.py:11:13: TL104"]
    );
}

const DATASETS: &str = "\
import torch
from torch.utils.data import Dataset


class Embeddings(Dataset):
    def __init__(self, paths):
        self.paths = paths

    def __getitem__(self, index):
        return torch.load(self.paths[index]).cuda()


class OnHost(Dataset):
    def __getitem__(self, index):
        return torch.zeros(3)


class Subset(Embeddings):
    pass


class Decoded(Embeddings):
    def __getitem__(self, index):
        return torch.load(self.paths[index])
";

#[test]
fn a_dataset_class_of_another_file_that_uses_the_gpu_in_workers() {
    // The loaders are in one file, the datasets in another: what a worker runs is the
    // dataset's file's, inherited `__getitem__` included, in either file.
    let project = Project::new();
    project.write("pkg/__init__.py", "");
    project.write("pkg/data.py", DATASETS);
    project.write(
        "pkg/train.py",
        "from torch.utils.data import DataLoader\n\nfrom .data import Decoded, Embeddings, OnHost, Subset\nimport pkg.data as data\n\n\nclass Cached(Embeddings):\n    def __len__(self):\n        return 3\n\n\nclass Listed(Embeddings):\n    def __getitem__(self, index):\n        return self.paths[index]\n\n\na = DataLoader(Embeddings(paths), num_workers=8)\nb = DataLoader(Subset(paths), num_workers=8)\nc = DataLoader(Cached(paths), num_workers=8)\nd = DataLoader(data.Embeddings(paths), num_workers=2)\ne = DataLoader(OnHost(), num_workers=8)\nf = DataLoader(Decoded(paths), num_workers=8)\ng = DataLoader(Listed(paths), num_workers=8)\nh = DataLoader(Embeddings(paths), num_workers=0)\n",
    );
    let expected = [
        "pkg/train.py:17:5: TL112",
        "pkg/train.py:18:5: TL112",
        "pkg/train.py:19:5: TL112",
        "pkg/train.py:20:5: TL112",
    ];
    assert_eq!(findings(&project, "TL112", &[]), expected);
    // Named alone, the file still sees the datasets it imports.
    assert_eq!(findings(&project, "TL112", &["pkg/train.py"]), expected);
    // The message says what the worker runs and where: the dataset's file names CUDA.
    let run = project.run(&["check", "--output-format", "concise", "--select", "TL112"]);
    assert!(
        run.stdout.contains(
            "pkg/train.py:17:5: TL112 `Embeddings.__getitem__` moves data to the GPU \
             (`torch.load(self.paths[index]).cuda()`, line 10 of `.data`) in each of the 8 \
             worker processes this loader starts"
        ),
        "{}",
        run.stdout
    );
}

/// Makes `lists` (TOML under `[tool.torchlint.frameworks]`) the project's config.
fn configure_frameworks(project: &Project, lists: &str) {
    project.write(
        "pyproject.toml",
        format!("[tool.torchlint.frameworks]\n{lists}"),
    );
}

/// Runs a check that must stop on the project's config (exit 2); what it printed.
fn config_error(project: &Project) -> String {
    let run = project.run(&["check", "--output-format", "concise"]);
    assert_eq!(run.code, 2, "{run:?}");
    run.stderr
}

fn findings(project: &Project, select: &str, args: &[&str]) -> Vec<String> {
    let mut all = vec!["check", "--output-format", "concise", "--select", select];
    all.extend_from_slice(args);
    project.run(&all).findings()
}

const EVALUATE_IMPORTED_MODEL: &str = "\
import torch
from pkg.nets import SeqNet

def evaluate(cfg, loader):
    model = SeqNet(cfg).cuda()
    model.eval()
    total = 0
    for x, y in loader:
        total += (model(x.cuda()).argmax(1) == y.cuda()).sum().item()
    return total
";

#[test]
fn a_class_defined_in_another_file_of_the_run_is_a_model() {
    let project = Project::new();
    project.write(
        "pkg/nets.py",
        "import torch.nn as nn\n\nclass SeqNet(nn.Module):\n    def __init__(self, cfg):\n        super().__init__()\n        self.fc = nn.Linear(cfg.width, 10)\n\n    def forward(self, x):\n        return self.fc(x)\n",
    );
    project.write("pkg/eval.py", EVALUATE_IMPORTED_MODEL);
    assert_eq!(
        findings(&project, "TL101", &[]),
        ["pkg/eval.py:9:19: TL101"]
    );
}

#[test]
fn a_class_of_another_file_that_is_no_module_is_not_a_model() {
    // A callable preprocessing class: calling it in evaluation code runs no model.
    let project = Project::new();
    project.write(
        "pkg/nets.py",
        "class Normalize:\n    def __init__(self, cfg):\n        self.mean = cfg.mean\n\n    def __call__(self, x):\n        return x - self.mean\n",
    );
    project.write(
        "pkg/eval.py",
        "import torch\nfrom pkg.nets import Normalize\n\ndef evaluate(cfg, loader):\n    normalize = Normalize(cfg)\n    total = 0\n    for x, y in loader:\n        total += (normalize(x.cuda()).argmax(1) == y.cuda()).sum().item()\n    return total\n",
    );
    assert_eq!(findings(&project, "TL101", &[]), Vec::<String>::new());
    // Made a module, the class makes the call a forward pass; the second run finds the first
    // run's result for the unchanged `eval.py` in the cache and must decide it again.
    project.write(
        "pkg/nets.py",
        "import torch.nn as nn\n\nclass Normalize(nn.Module):\n    def forward(self, x):\n        return x\n",
    );
    assert_eq!(
        findings(&project, "TL101", &[]),
        ["pkg/eval.py:8:19: TL101"]
    );
}

#[test]
fn a_factory_in_another_file_returns_a_model() {
    let project = Project::new();
    project.write(
        "pkg/factory.py",
        "import torchvision\n\ndef build_model(name):\n    return torchvision.models.resnet18(num_classes=10)\n",
    );
    project.write(
        "pkg/eval.py",
        "import torch\nfrom pkg.factory import build_model\n\ndef evaluate(loader):\n    model = build_model(\"r18\").cuda()\n    model.eval()\n    hits = 0\n    for x, y in loader:\n        hits += (model(x.cuda()).argmax(1) == y.cuda()).sum().item()\n    return hits\n",
    );
    assert_eq!(
        findings(&project, "TL101", &[]),
        ["pkg/eval.py:9:18: TL101"]
    );
}

const METER: &str = "\
class AverageMeter:
    def __init__(self):
        self.sum = 0.0
        self.count = 0

    def update(self, val, n=1):
        self.sum += val * n
        self.count += n
";

#[test]
fn a_meter_of_another_file_that_keeps_a_graph_carrying_loss_is_reported_where_it_keeps_it() {
    let project = Project::new();
    project.write("pkg/utils.py", METER);
    project.write(
        "pkg/train.py",
        "import torch\nfrom pkg.utils import AverageMeter\n\ndef train(model, loader, opt, criterion):\n    losses = AverageMeter()\n    for x, y in loader:\n        loss = criterion(model(x.cuda()), y.cuda())\n        opt.zero_grad()\n        loss.backward()\n        opt.step()\n        losses.update(loss, x.size(0))\n",
    );
    assert_eq!(
        findings(&project, "TL102", &[]),
        ["pkg/utils.py:7:9: TL102"]
    );
}

#[test]
fn a_meter_passed_only_numbers_is_not_reported() {
    let project = Project::new();
    project.write("pkg/utils.py", METER);
    project.write(
        "pkg/train.py",
        "import torch\nfrom pkg.utils import AverageMeter\n\ndef train(model, loader, opt, criterion):\n    losses = AverageMeter()\n    for x, y in loader:\n        loss = criterion(model(x.cuda()), y.cuda())\n        opt.zero_grad()\n        loss.backward()\n        opt.step()\n        losses.update(loss.item(), x.size(0))\n",
    );
    assert_eq!(findings(&project, "TL102", &[]), Vec::<String>::new());
}

const LOSS_TERMS: &str = "\
import torch.nn.functional as F

def compute_losses(model, x, y):
    out = model(x)
    return {\"mse\": F.mse_loss(out, y), \"l1\": F.l1_loss(out, y)}
";

#[test]
fn loss_terms_another_file_returns_are_reported_where_each_is_accumulated_with_its_graph() {
    let project = Project::new();
    project.write("pkg/losses.py", LOSS_TERMS);
    let train = |accumulated: &str| {
        format!(
            "from pkg.losses import compute_losses\n\ndef train(model, loader, opt):\n    totals = {{}}\n    for x, y in loader:\n        parts = compute_losses(model, x.cuda(), y.cuda())\n        opt.zero_grad()\n        sum(parts.values()).backward()\n        opt.step()\n        for name, value in parts.items():\n            totals[name] = totals.get(name, 0.0) + {accumulated}\n"
        )
    };
    project.write("pkg/train.py", train("value"));
    assert_eq!(
        findings(&project, "TL102", &[]),
        ["pkg/train.py:11:13: TL102"]
    );
    project.write("pkg/train.py", train("value.item()"));
    assert_eq!(findings(&project, "TL102", &[]), Vec::<String>::new());
}

const IN_HOUSE_FACTORY: &str = "\
import torch
from acme.zoo import build_backbone

def evaluate(loader):
    f = build_backbone(\"r50\")
    hits = 0
    for x, y in loader:
        hits += (f(x.cuda()).argmax(1) == y.cuda()).sum().item()
    return hits
";

#[test]
fn the_config_extends_the_framework_table_with_an_in_house_factory() {
    let project = Project::new();
    project.write("train.py", IN_HOUSE_FACTORY);
    // Nothing says what `build_backbone` returns.
    assert_eq!(findings(&project, "TL101", &[]), Vec::<String>::new());
    configure_frameworks(&project, "model-factories = [\"acme.zoo.build_*\"]\n");
    assert_eq!(findings(&project, "TL101", &[]), ["train.py:8:18: TL101"]);
}

const IN_HOUSE_ENGINE: &str = "\
import torch
from acme.dist import Engine

@torch.no_grad()
def collect(model, val_loader):
    engine = Engine()
    model, val_loader = engine.place(model, val_loader)
    labels = []
    for x, y in val_loader:
        labels.append(y)
    return torch.cat(labels)
";

#[test]
fn the_config_names_an_in_house_engine_that_places_loaders_on_the_device() {
    let project = Project::new();
    project.write("eval.py", IN_HOUSE_ENGINE);
    // Batches of a plain loader are on the CPU.
    assert_eq!(findings(&project, "TL104", &[]), Vec::<String>::new());
    configure_frameworks(&project, "device-placers = [\"acme.dist.Engine.place\"]\n");
    assert_eq!(findings(&project, "TL104", &[]), ["eval.py:10:9: TL104"]);
}

const IN_HOUSE_HOOK: &str = "\
import torch.nn as nn
from acme.train import Task

class Classifier(Task):
    def __init__(self):
        super().__init__()
        self.net = nn.Linear(16, 4)

    def score_batch(self, batch):
        x, y = batch
        return (self.net(x).argmax(1) == y).float().mean()
";

#[test]
fn the_config_names_a_method_an_in_house_trainer_runs_without_grad() {
    let project = Project::new();
    project.write("task.py", IN_HOUSE_HOOK);
    assert_eq!(findings(&project, "TL101", &[]), ["task.py:11:17: TL101"]);
    configure_frameworks(
        &project,
        "no-grad-hooks = [\"acme.train.Task.score_batch\"]\n",
    );
    assert_eq!(findings(&project, "TL101", &[]), Vec::<String>::new());
}

const IN_HOUSE_BACKWARD: &str = "\
def evaluate(model, engine, val_loader):
    model.eval()
    scores = []
    for x, y in val_loader:
        out = model(x)
        engine.backprop(out.sum())
        scores.append(out.argmax(1).eq(y).float().mean().item())
    return sum(scores) / len(scores)
";

#[test]
fn the_config_names_the_backward_of_an_in_house_engine() {
    // Test-time adaptation: the evaluation loop backpropagates through its own forward, so it
    // needs the graph. Only a backward the table knows says so.
    let project = Project::new();
    project.write("evaluate.py", IN_HOUSE_BACKWARD);
    assert_eq!(
        findings(&project, "TL101", &[]),
        ["evaluate.py:5:15: TL101"]
    );
    configure_frameworks(&project, "backward-methods = [\"backprop\"]\n");
    assert_eq!(findings(&project, "TL101", &[]), Vec::<String>::new());
    // A receiver or a pattern is an error at the entry.
    configure_frameworks(
        &project,
        "backward-methods = [\n  \"engine.backprop\",\n]\n",
    );
    let stderr = config_error(&project);
    assert!(
        stderr.contains("pyproject.toml:3:")
            && stderr.contains(
                "`engine.backprop` in `frameworks.backward-methods` is not a method name"
            ),
        "{}",
        stderr
    );
}

const IN_HOUSE_BATCH_HOOK: &str = "\
import torch


class KnnProbe:
    def __init__(self, device):
        self.device = device
        self.bank = []

    def on_batch(self, batch):
        feats, labels = batch
        self.bank.append(labels)
";

#[test]
fn the_config_names_the_per_batch_hooks_of_an_in_house_framework() {
    // Nothing in the file calls `on_batch`: the framework does, once per batch, with the batch
    // on the device. Only the table can say so.
    let project = Project::new();
    project.write("probe.py", IN_HOUSE_BATCH_HOOK);
    assert_eq!(findings(&project, "TL104", &[]), Vec::<String>::new());
    configure_frameworks(&project, "per-batch-hooks = [\"on_batch(batch)\"]\n");
    assert_eq!(findings(&project, "TL104", &[]), ["probe.py:11:9: TL104"]);
    // An entry that is not `name` or `name(parameter, ...)` is an error at its line.
    configure_frameworks(
        &project,
        "per-batch-hooks = [\n  \"Runner.on_batch(batch\",\n]\n",
    );
    let stderr = config_error(&project);
    assert!(
        stderr.contains("pyproject.toml:3:")
            && stderr.contains("`Runner.on_batch(batch`")
            && stderr.contains("frameworks.per-batch-hooks"),
        "{}",
        stderr
    );
}

/// A meter of an in-house metrics package: `add` is its per-batch update, and only the table
/// can say so; a method of that name elsewhere is not one.
const IN_HOUSE_METER: &str = "\
from acme.metrics import Meter


class Recall(Meter):
    def __init__(self):
        self.hits = []

    def add(self, preds, target):
        self.hits.append(preds.argmax(1) == target)


class Names:
    def __init__(self):
        self.names = []

    def add(self, name, value):
        self.names.append(value)
";

#[test]
fn the_config_names_a_per_batch_hook_by_the_base_class_of_an_in_house_framework() {
    let project = Project::new();
    project.write("metrics.py", IN_HOUSE_METER);
    assert_eq!(findings(&project, "TL104", &[]), Vec::<String>::new());
    configure_frameworks(
        &project,
        "per-batch-hooks = [\"acme.metrics.Meter.add(*)\"]\n",
    );
    assert_eq!(findings(&project, "TL104", &[]), ["metrics.py:9:9: TL104"]);
}

/// An evaluation loop that keeps what an in-house collective returns: the gathered tensors
/// stay on the device only if the table says that `collect` gathers.
const IN_HOUSE_GATHER: &str = "\
import torch


def evaluate(model, loader, comm):
    losses = []
    for batch in loader:
        with torch.no_grad():
            loss = model(batch.cuda())
        losses.append(comm.collect(loss))
    return torch.cat(losses).mean().item()
";

#[test]
fn the_config_names_the_gathering_methods_of_an_in_house_framework() {
    let project = Project::new();
    project.write("evaluate.py", IN_HOUSE_GATHER);
    assert_eq!(findings(&project, "TL104", &[]), Vec::<String>::new());
    configure_frameworks(&project, "gathering-methods = [\"collect\"]\n");
    assert_eq!(findings(&project, "TL104", &[]), ["evaluate.py:9:9: TL104"]);
    // A receiver or a pattern is an error at its line, naming the list.
    configure_frameworks(&project, "gathering-methods = [\n  \"comm.collect\",\n]\n");
    let stderr = config_error(&project);
    assert!(
        stderr.contains("pyproject.toml:3:")
            && stderr
                .contains("`comm.collect` in `frameworks.gathering-methods` is not a method name"),
        "{}",
        stderr
    );
}

#[test]
fn a_bad_framework_entry_is_an_error_at_its_line() {
    let project = Project::new();
    project.write("train.py", IN_HOUSE_FACTORY);
    configure_frameworks(&project, "model-factories = [\n  \"acme.zoo.[build\",\n]\n");
    let stderr = config_error(&project);
    assert!(
        stderr.contains("pyproject.toml:3:")
            && stderr.contains("`acme.zoo.[build` in `frameworks.model-factories`"),
        "{}",
        stderr
    );
    configure_frameworks(&project, "model-factory = [\"acme.zoo.build_*\"]\n");
    let stderr = config_error(&project);
    assert!(
        stderr.contains("unknown key `model-factory` in `frameworks`"),
        "{}",
        stderr
    );
}

#[test]
fn a_run_on_one_file_of_a_project_sees_the_rest_of_it() {
    // pre-commit passes only the staged file; its callers in the other files disable grad.
    let project = Project::new();
    project.write("pyproject.toml", "[tool.torchlint]\n");
    project.write("pkg/metrics.py", EVAL_HELPER);
    project.write(
        "pkg/train.py",
        "import torch\nfrom .metrics import evaluate\n\ndef fit(model, loader):\n    with torch.no_grad():\n        return evaluate(model, loader)\n",
    );
    assert_eq!(tl101(&project, &["pkg/metrics.py"]), Vec::<String>::new());
    // The other files' own findings are not reported.
    project.write(
        "pkg/report.py",
        "import torch\n\ndef report(model, loader):\n    model.eval()\n    for x, y in loader:\n        print(model(x))\n",
    );
    assert_eq!(tl101(&project, &["pkg/metrics.py"]), Vec::<String>::new());
    assert_eq!(tl101(&project, &[]), ["pkg/report.py:6:15: TL101"]);
    // A grad-enabled caller anywhere in the project keeps the staged file's finding.
    project.write(
        "pkg/report.py",
        "from pkg.metrics import evaluate\n\ndef report(model, loader):\n    print(evaluate(model, loader))\n",
    );
    assert_eq!(
        tl101(&project, &["pkg/metrics.py"]),
        ["pkg/metrics.py:7:21: TL101"]
    );
}

#[test]
fn a_repository_without_a_config_is_the_project_of_its_files() {
    let project = Project::new();
    std::fs::create_dir_all(project.path().join(".git")).unwrap();
    project.write("metrics.py", EVAL_HELPER);
    project.write(
        "train.py",
        "import torch\nfrom metrics import evaluate\n\ndef fit(model, loader):\n    with torch.inference_mode():\n        evaluate(model, loader)\n",
    );
    assert_eq!(tl101(&project, &["metrics.py"]), Vec::<String>::new());
}

#[test]
fn a_context_file_edited_to_the_same_length_is_read_again_for_its_imports() {
    // The imports of a context file are kept between runs while its length, modification
    // time and inode stay; an edit that keeps the length still counts.
    let project = Project::new();
    std::fs::create_dir_all(project.path().join(".git")).unwrap();
    project.write("metrics.py", EVAL_HELPER);
    let main = |module: &str| {
        format!(
            "import torch\nfrom {module} import evaluate\n\n@torch.no_grad()\ndef main(model, loader):\n    evaluate(model, loader)\n"
        )
    };
    project.write("main.py", main("metric2"));
    assert_eq!(tl101(&project, &["metrics.py"]), ["metrics.py:7:21: TL101"]);
    project.write("main.py", main("metrics"));
    assert_eq!(tl101(&project, &["metrics.py"]), Vec::<String>::new());
    project.write("main.py", main("metric2"));
    assert_eq!(tl101(&project, &["metrics.py"]), ["metrics.py:7:21: TL101"]);
}

#[test]
fn context_files_are_those_related_by_imports_and_not_too_large() {
    // `metrics.evaluate` ← `loops.run_eval` ← `main` under no_grad: a caller two imports away
    // is context of a run on `metrics.py`.
    let project = Project::new();
    std::fs::create_dir_all(project.path().join(".git")).unwrap();
    project.write("metrics.py", EVAL_HELPER);
    project.write(
        "loops.py",
        "from metrics import evaluate\n\ndef run_eval(model, loader):\n    return evaluate(model, loader)\n",
    );
    project.write(
        "main.py",
        "import torch\nfrom loops import run_eval\n\n@torch.no_grad()\ndef main(model, loader):\n    run_eval(model, loader)\n",
    );
    assert_eq!(tl101(&project, &["metrics.py"]), Vec::<String>::new());
    // A context file over the size limit (a generated module) is not read: its call is not
    // seen, and without it the helper's callers are unknown.
    let padding: String = (0..200).map(|i| format!("X_{i:05} = {i}\n")).collect();
    project.write(
        "main.py",
        format!(
            "import torch\nfrom loops import run_eval\n\n@torch.no_grad()\ndef main(model, loader):\n    run_eval(model, loader)\n{padding}"
        ),
    );
    project.write(
        "pyproject.toml",
        "[tool.torchlint]\ncontext-size-limit = 1_000\n",
    );
    assert_eq!(tl101(&project, &["metrics.py"]), ["metrics.py:7:21: TL101"]);
    // Named, the same file is linted whole.
    assert_eq!(
        tl101(&project, &["main.py", "metrics.py"]),
        Vec::<String>::new()
    );
    // Under the limit, it is context again.
    project.write(
        "pyproject.toml",
        "[tool.torchlint]\ncontext-size-limit = 0x10000\n",
    );
    assert_eq!(tl101(&project, &["metrics.py"]), Vec::<String>::new());
    project.write(
        "pyproject.toml",
        "[tool.torchlint]\ncontext-size-limit = \"4MB\"\n",
    );
    let run = project.run(&["check", "metrics.py"]);
    assert_eq!(run.code, 2, "{}", run.stderr);
    assert!(
        run.stderr
            .contains("pyproject.toml:2: `context-size-limit` takes a number of bytes"),
        "{}",
        run.stderr
    );
}

#[test]
fn verbose_tells_what_the_run_read_left_out_and_linted_twice() {
    // `a.py` and `b.py` import each other: the smaller, `b.py`, is linted before `a.py`'s facts
    // are in, then again once they are. `big.py` imports `b` but is over the size limit;
    // `other.py` imports nothing of them.
    let project = Project::new();
    std::fs::create_dir_all(project.path().join(".git")).unwrap();
    let padding: String = (0..100).map(|i| format!("X_{i:05} = {i}\n")).collect();
    project.write(
        "a.py",
        format!(
            "import torch\nfrom b import helper\n\ndef evaluate(model, loader):\n    model.eval()\n    outs = []\n    for x in loader:\n        outs.append(model(x))\n    return outs\n{padding}"
        ),
    );
    project.write(
        "b.py",
        "from a import evaluate\n\ndef helper(model, loader):\n    return evaluate(model, loader)\n",
    );
    project.write(
        "main.py",
        "import torch\nfrom b import helper\n\ndef main(model, loader):\n    helper(model, loader)\n",
    );
    project.write("big.py", format!("import b\n{}", padding.repeat(20)));
    project.write("other.py", "x = 1\n");
    project.write(
        "pyproject.toml",
        "[tool.torchlint]\ncontext-size-limit = 10_000\n",
    );
    let notes = |args: &[&str]| -> Vec<String> {
        let run = project.run(args);
        assert!(run.code == 0 || run.code == 1, "{}", run.stderr);
        run.stderr
            .lines()
            .filter(|line| line.starts_with("note: "))
            .map(str::to_owned)
            .collect()
    };
    assert_eq!(
        notes(&["check", "--no-cache", "-v", "main.py"]),
        [
            "note: context: 2 other files of the project, related to the named files by imports (their facts decide findings here); 1 unrelated, left out",
            "note: big.py: not read for facts: 25809 bytes is over `context-size-limit` (10000 bytes); name it to lint it",
            "note: b.py: linted twice: it is part of an import cycle, and the files it imports answered its questions otherwise once they were linted",
        ]
    );
    // Without `-v`, none of it.
    assert_eq!(
        notes(&["check", "--no-cache", "main.py"]),
        Vec::<String>::new()
    );
    // A whole folder has no context; a second run with nothing changed replays the first
    // (files written within the first run's last moments would not be trusted to it).
    let past = std::time::SystemTime::now() - std::time::Duration::from_secs(10);
    for file in [
        "a.py",
        "b.py",
        "main.py",
        "big.py",
        "other.py",
        "pyproject.toml",
    ] {
        let file = std::fs::File::options()
            .write(true)
            .open(project.path().join(file))
            .unwrap();
        file.set_modified(past).unwrap();
    }
    let cycle = "note: b.py: linted twice: it is part of an import cycle, and the files it imports answered its questions otherwise once they were linted";
    assert_eq!(notes(&["check", "-v", "."]), [cycle]);
    assert_eq!(
        notes(&["check", "-v", "."]),
        [
            "note: no file of the run changed since the last run: its results come from the cache (`--no-cache` lints afresh)"
        ]
    );
    let run = project.run(&["check", "-v", "-q", "."]);
    assert_eq!(run.code, 2);
    assert!(run.stderr.contains("cannot be used with"), "{}", run.stderr);
}
