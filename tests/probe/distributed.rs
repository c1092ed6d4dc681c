//! `torchlint probe --nproc-per-node N`: a DDP job launched through `torch.distributed.run`
//! on CPU ranks (the `gloo` backend), the runner inside every rank.

use std::path::Path;
use std::time::{Duration, Instant};

use super::common::{Project, Run};
use super::{assert_child_ended, json, require_torch};
use serde_json::Value;

/// Two ranks train a DDP model and keep every step's loss (TL102 on line 20, on both ranks);
/// rank 0 alone then evaluates with grad on (TL101 on line 24). `FAIL_RANK` makes that rank
/// raise after its first steps, `HANG_RANK` makes it sleep while the other waits in a barrier.
/// Each rank writes its pid to `rank-N.pid`.
const DDP_SCRIPT: &str = "\
import os, time
import torch, torch.distributed as dist, torch.nn as nn
from torch.nn.parallel import DistributedDataParallel as DDP
dist.init_process_group('gloo')
rank = dist.get_rank()
open('rank-%d.pid' % rank, 'w').write(str(os.getpid()))
if os.environ.get('HANG_RANK') == str(rank):
    time.sleep(300)
dist.barrier()
model = DDP(nn.Sequential(nn.Linear(64, 256), nn.ReLU(), nn.Linear(256, 10)))
opt = torch.optim.SGD(model.parameters(), lr=0.01)
losses = []
for step in range(40):
    if step == 3 and os.environ.get('FAIL_RANK') == str(rank):
        raise RuntimeError('rank %d gave up' % rank)
    loss = nn.functional.cross_entropy(model(torch.randn(32, 64)), torch.randint(0, 10, (32,)))
    opt.zero_grad()
    loss.backward()
    opt.step()
    losses.append(loss)
if rank == 0:
    model.eval()
    for _ in range(30):
        losses.append(model.module(torch.randn(32, 64)))
dist.destroy_process_group()
";

fn probe_job(project: &Project, python: &Path, env: &[(&str, &str)], extra: &[&str]) -> Run {
    let python = python.to_str().unwrap();
    let mut args = vec!["ddp.py", "--nproc-per-node", "2", "--output-format", "json"];
    args.extend_from_slice(extra);
    project.write("ddp.py", DDP_SCRIPT);
    let mut command = project.command();
    command
        .arg("probe")
        .args(["--python", python])
        .args(&args)
        .env("OMP_NUM_THREADS", "1")
        .env("CUDA_VISIBLE_DEVICES", "");
    for (name, value) in env {
        command.env(name, value);
    }
    Run::from(command.output().expect("run torchlint probe"))
}

fn finding<'a>(report: &'a Value, code: &str) -> &'a Value {
    report["findings"]
        .as_array()
        .unwrap()
        .iter()
        .find(|finding| finding["code"] == code)
        .unwrap_or_else(|| panic!("no {code} finding in {report:#}"))
}

fn rank_statuses(finding: &Value) -> Vec<(u64, String)> {
    finding["ranks"]
        .as_array()
        .unwrap_or_else(|| panic!("no per-rank verdicts in {finding:#}"))
        .iter()
        .map(|entry| {
            (
                entry["rank"].as_u64().unwrap(),
                entry["verdict"]["status"].as_str().unwrap().to_owned(),
            )
        })
        .collect()
}

fn assert_ranks_ended(project: &Project) {
    for rank in 0..2 {
        let pid_file = project.path().join(format!("rank-{rank}.pid"));
        if pid_file.exists() {
            assert_child_ended(&pid_file);
        }
    }
}

#[test]
fn each_rank_gets_its_verdict_and_a_line_only_rank_0_reaches_says_so() {
    let Some(python) = require_torch("each_rank_gets_its_verdict") else {
        return;
    };
    let project = Project::new();
    let run = probe_job(&project, &python, &[], &[]);
    let report = json(&run);
    assert_eq!(
        report["stop"], "script-exited",
        "{report:#}\n{}",
        run.stderr
    );
    let ranks: Vec<u64> = report["ranks"]
        .as_array()
        .unwrap()
        .iter()
        .map(|rank| rank["rank"].as_u64().unwrap())
        .collect();
    assert_eq!(ranks, [0, 1], "{report:#}");
    // Each rank's own peak, read in its own process.
    for rank in report["ranks"].as_array().unwrap() {
        assert!(rank["peak_rss"].as_u64().unwrap() > 0, "{report:#}");
    }

    let kept = finding(&report, "TL102");
    assert_eq!(kept["line"], 20);
    assert_eq!(
        rank_statuses(kept),
        [(0, "confirmed".to_owned()), (1, "confirmed".to_owned())]
    );
    assert!(
        kept["verdict"]["summary"]
            .as_str()
            .unwrap()
            .starts_with("confirmed on ranks 0 and 1"),
        "{kept:#}"
    );

    let evaluation = finding(&report, "TL101");
    assert_eq!(
        rank_statuses(evaluation),
        [(0, "confirmed".to_owned()), (1, "not-reached".to_owned())]
    );
    let summary = evaluation["verdict"]["summary"].as_str().unwrap();
    assert!(summary.starts_with("confirmed on rank 0 ("), "{summary}");
    assert!(summary.ends_with("; not reached on rank 1"), "{summary}");
    assert_ranks_ended(&project);
}

#[test]
fn a_rank_that_raises_is_named_as_the_one_that_failed_first() {
    let Some(python) = require_torch("a_rank_that_raises") else {
        return;
    };
    let project = Project::new();
    let run = probe_job(&project, &python, &[("FAIL_RANK", "1")], &[]);
    let report = json(&run);
    assert_eq!(report["failed_rank"], 1, "{report:#}\n{}", run.stderr);
    let failed = report["ranks"]
        .as_array()
        .unwrap()
        .iter()
        .find(|rank| rank["rank"] == 1)
        .unwrap();
    assert_eq!(failed["status"], 1, "{report:#}");
    assert_eq!(
        failed["error"], "RuntimeError: rank 1 gave up",
        "{report:#}"
    );
    // The job failed as running it would: the probe's status is the failed rank's.
    assert_eq!(run.code, 1, "{}", run.stderr);
    assert_ranks_ended(&project);
}

#[test]
fn a_rank_hanging_in_a_collective_is_ended_with_the_whole_job_at_the_timeout() {
    let Some(python) = require_torch("a_rank_hanging_in_a_collective") else {
        return;
    };
    let project = Project::new();
    let started = Instant::now();
    let run = probe_job(
        &project,
        &python,
        &[("HANG_RANK", "1")],
        &["--timeout", "15"],
    );
    assert!(
        started.elapsed() < Duration::from_secs(60),
        "took {:?}",
        started.elapsed()
    );
    let report = json(&run);
    assert_eq!(report["stop"], "timeout", "{report:#}\n{}", run.stderr);
    assert_eq!(
        rank_statuses(finding(&report, "TL102")),
        [(0, "not-reached".to_owned()), (1, "not-reached".to_owned())]
    );
    assert!(
        project.path().join("rank-1.pid").exists(),
        "rank 1 never started"
    );
    assert_ranks_ended(&project);
}

#[test]
fn ctrl_c_ends_every_rank_and_still_reports() {
    let Some(python) = require_torch("ctrl_c_ends_every_rank") else {
        return;
    };
    let project = Project::new();
    project.write("ddp.py", DDP_SCRIPT);
    let child = project
        .command()
        .arg("probe")
        .args(["--python", python.to_str().unwrap()])
        .args(["ddp.py", "--nproc-per-node", "2", "--output-format", "json"])
        .env("OMP_NUM_THREADS", "1")
        .env("CUDA_VISIBLE_DEVICES", "")
        .env("HANG_RANK", "1")
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .expect("spawn torchlint probe");
    let pid_files = [0, 1].map(|rank| project.path().join(format!("rank-{rank}.pid")));
    let deadline = Instant::now() + Duration::from_secs(60);
    while !pid_files.iter().all(|file| file.exists()) && Instant::now() < deadline {
        std::thread::sleep(Duration::from_millis(50));
    }
    assert!(
        pid_files.iter().all(|file| file.exists()),
        "the ranks did not start"
    );
    // What the terminal sends on Ctrl-C (to torchlint only: the job has its own groups).
    // SAFETY: sends a signal to the child we spawned.
    unsafe {
        libc::kill(child.id() as libc::pid_t, libc::SIGINT);
    }
    let run = Run::from(child.wait_with_output().expect("wait for torchlint"));
    let report = json(&run);
    assert_eq!(report["stop"], "interrupted", "{report:#}\n{}", run.stderr);
    assert_ranks_ended(&project);
}

#[test]
fn the_launcher_command_line_the_user_runs_is_probed_as_it_is() {
    let Some(python) = require_torch("the_launcher_command_line") else {
        return;
    };
    let project = Project::new();
    project.write("ddp.py", DDP_SCRIPT);
    let python = python.to_str().unwrap();
    let mut command = project.command();
    command
        .args(["probe", "--output-format", "json", "--"])
        .args([python, "-m", "torch.distributed.run", "--standalone"])
        .args(["--nproc_per_node=2", "ddp.py"])
        .env("OMP_NUM_THREADS", "1")
        .env("CUDA_VISIBLE_DEVICES", "");
    let run = Run::from(command.output().expect("run torchlint probe"));
    let report = json(&run);
    assert_eq!(
        report["stop"], "script-exited",
        "{report:#}\n{}",
        run.stderr
    );
    assert_eq!(report["script"], "ddp.py");
    assert_eq!(report["command"][1], "-m", "{report:#}");
    assert_eq!(
        rank_statuses(finding(&report, "TL101")),
        [(0, "confirmed".to_owned()), (1, "not-reached".to_owned())]
    );
    assert_ranks_ended(&project);
}

#[test]
fn a_launcher_command_line_the_probe_cannot_run_is_refused_with_the_reason() {
    let project = Project::new();
    for (args, says) in [
        (&["torchrun", "-m", "train"][..], "not a module"),
        (
            &["torchrun", "--nnodes", "1"][..],
            "names no training script",
        ),
        (&["python", "train.py"][..], "name the training script"),
    ] {
        let run = project.run(&[&["probe", "--"][..], args].concat());
        assert_eq!(run.code, 2, "{args:?}: {}", run.stderr);
        assert!(run.stderr.contains(says), "{args:?}: {}", run.stderr);
    }
    let run = project.run(&["probe", "--nproc-per-node", "2", "--", "torchrun", "a.py"]);
    assert_eq!(run.code, 2, "{}", run.stderr);
    assert!(
        run.stderr.contains("goes on the launcher's command line"),
        "{}",
        run.stderr
    );
}

#[test]
fn two_hosts_probed_apart_merge_into_one_jobs_report() {
    let Some(python) = require_torch("two_hosts_probed_apart") else {
        return;
    };
    let project = Project::new();
    project.write("ddp.py", DDP_SCRIPT);
    let python = python.to_str().unwrap();
    // Two "hosts" on this one: each its own launcher and probe, one rank each, meeting at a
    // free port (static rendezvous, as two machines of a cluster would).
    let port = std::net::TcpListener::bind("127.0.0.1:0")
        .and_then(|listener| listener.local_addr())
        .expect("a free port")
        .port()
        .to_string();
    let hosts: Vec<std::process::Child> = (0..2)
        .map(|node| {
            let report = std::fs::File::create(project.path().join(format!("node{node}.json")))
                .expect("report file");
            project
                .command()
                .args(["probe", "--output-format", "json", "--"])
                .args([python, "-m", "torch.distributed.run", "--nnodes", "2"])
                .args(["--node-rank", &node.to_string(), "--nproc-per-node", "1"])
                .args([
                    "--master-addr",
                    "127.0.0.1",
                    "--master-port",
                    &port,
                    "ddp.py",
                ])
                .env("OMP_NUM_THREADS", "1")
                .env("CUDA_VISIBLE_DEVICES", "")
                .stdout(report)
                .stderr(std::process::Stdio::null())
                .spawn()
                .expect("spawn torchlint probe")
        })
        .collect();
    for mut host in hosts {
        host.wait().expect("a host's probe");
    }
    let run = project.run(&[
        "probe",
        "merge",
        "--output-format",
        "json",
        "node0.json",
        "node1.json",
    ]);
    let merged = json(&run);
    let ranks: Vec<u64> = merged["ranks"]
        .as_array()
        .unwrap_or_else(|| panic!("{merged:#}\n{}", run.stderr))
        .iter()
        .map(|rank| rank["rank"].as_u64().unwrap())
        .collect();
    assert_eq!(ranks, [0, 1], "{merged:#}");
    let evaluation = finding(&merged, "TL101");
    assert_eq!(
        rank_statuses(evaluation),
        [(0, "confirmed".to_owned()), (1, "not-reached".to_owned())]
    );
    assert!(
        evaluation["verdict"]["summary"]
            .as_str()
            .unwrap()
            .ends_with("; not reached on rank 1"),
        "{evaluation:#}"
    );
    assert_eq!(run.code, 1, "a confirmed finding: {}", run.stderr);
    assert_eq!(
        merged["hosts"],
        serde_json::json!(["node0.json", "node1.json"])
    );

    // By default the merged report prints as the probe prints its own: each finding with its
    // verdict and evidence per rank, the run with its ranks and hosts, the verdict table.
    let run = project.run(&["probe", "merge", "node0.json", "node1.json"]);
    assert_eq!(run.code, 1, "a confirmed finding: {}", run.stderr);
    let text = &run.stdout;
    for line in [
        "probe of ddp.py",
        "  hosts: node0.json (rank 0), node1.json (rank 1)",
        "2 of 2 watched findings confirmed.",
    ] {
        assert!(
            text.lines().any(|seen| seen == line),
            "no `{line}` in:\n{text}"
        );
    }
    for start in [
        "error[TL102]: confirmed: ",
        "error[TL101]: confirmed: ",
        "  ranks: 2 through torch.distributed.run: 0 ",
        "   = probe: confirmed on ranks 0 and 1 (",
        "   = probe: confirmed on rank 0 (",
        "   = evidence: rank 1: ",
        "confirmed          20  TL102     30  confirmed on ranks 0 and 1 (",
        "confirmed          24  TL101     30  confirmed on rank 0 (",
        // Each rank's own memory split, not only the lowest rank's.
        "rank 0: host memory of the model and optimizer ",
        "rank 1: host memory of the model and optimizer ",
    ] {
        assert!(
            text.lines().any(|seen| seen.starts_with(start)),
            "no line starting `{start}` in:\n{text}"
        );
    }
    assert!(
        text.contains("20 │     losses.append(loss)\n"),
        "the flagged line, from the script:\n{text}"
    );
    assert!(
        (text.lines())
            .any(|line| line.contains("TL101") && line.ends_with("; not reached on rank 1")),
        "{text}"
    );

    // Merged where the script is not at hand, with the HTML report: the flagged lines are
    // quoted from the reports.
    std::fs::remove_file(project.path().join("ddp.py")).unwrap();
    let run = project.run(&[
        "probe",
        "merge",
        "--report",
        "merged.html",
        "node0.json",
        "node1.json",
    ]);
    assert_eq!(run.code, 1, "{}", run.stderr);
    assert!(
        run.stdout.contains("20 │     losses.append(loss)\n"),
        "quoted from the report:\n{}",
        run.stdout
    );
    let page = std::fs::read_to_string(project.path().join("merged.html")).unwrap();
    assert!(page.contains("hosts: node0.json (rank 0), node1.json (rank 1)"));
    assert!(page.contains("No memory timeline"), "{page}");
    // A row per rank, and each rank's own memory split.
    assert!(page.contains("<tr><th>0</th><td>"), "{page}");
    assert!(page.contains("<tr><th>1</th><td>exited 0</td>"), "{page}");
    assert!(
        page.contains("<caption>rank 1: host memory of the model and optimizer"),
        "{page}"
    );
    assert_ranks_ended(&project);
}

#[test]
fn one_host_is_all_the_probe_launches_itself() {
    let project = Project::new();
    let run = project.run(&[
        "probe",
        "train.py",
        "--nnodes",
        "2",
        "--nproc-per-node",
        "4",
    ]);
    assert_eq!(run.code, 2, "{}", run.stderr);
    let lines: Vec<&str> = run.stderr.lines().collect();
    assert_eq!(lines.len(), 1, "one line: {}", run.stderr);
    assert!(
        lines[0].starts_with("error: --nnodes 2: the probe runs one host's ranks; probe each host with its launcher's command line after `--` (`torchlint probe --output-format json -- torchrun --nnodes 2 "),
        "{}",
        run.stderr
    );
    assert!(
        lines[0].ends_with("train.py > host0.json`), then combine the reports with `torchlint probe merge host0.json host1.json`"),
        "{}",
        run.stderr
    );
    for (args, says) in [
        (
            &["probe", "train.py", "--nnodes", "1"][..],
            "error: --nnodes 1 goes with --nproc-per-node N",
        ),
        (
            &[
                "probe",
                "--nnodes",
                "1",
                "--",
                "torchrun",
                "--nproc-per-node",
                "2",
                "a.py",
            ][..],
            "error: --nnodes goes on the launcher's command line",
        ),
        (
            &[
                "probe",
                "train.py",
                "--nnodes",
                "0",
                "--nproc-per-node",
                "1",
            ][..],
            "error: --nnodes must be at least 1",
        ),
    ] {
        let run = project.run(args);
        assert_eq!(run.code, 2, "{args:?}: {}", run.stderr);
        assert!(run.stderr.starts_with(says), "{args:?}: {}", run.stderr);
    }
}

#[test]
fn nnodes_1_with_nproc_per_node_is_the_single_host_job() {
    let Some(python) = require_torch("nnodes_1_with_nproc_per_node") else {
        return;
    };
    let project = Project::new();
    project.write("ddp.py", DDP_SCRIPT);
    let mut command = project.command();
    command
        .arg("probe")
        .args(["--python", python.to_str().unwrap()])
        .args(["ddp.py", "--nnodes", "1", "--nproc-per-node", "1"])
        .args(["--output-format", "json"])
        .env("OMP_NUM_THREADS", "1")
        .env("CUDA_VISIBLE_DEVICES", "");
    let run = Run::from(command.output().expect("run torchlint probe"));
    let report = json(&run);
    let ranks: Vec<u64> = report["ranks"]
        .as_array()
        .unwrap_or_else(|| panic!("{report:#}\n{}", run.stderr))
        .iter()
        .map(|rank| rank["rank"].as_u64().unwrap())
        .collect();
    assert_eq!(ranks, [0], "{report:#}");
    assert_eq!(
        rank_statuses(finding(&report, "TL101")),
        [(0, "confirmed".to_owned())]
    );
    assert_eq!(run.code, 1, "a confirmed finding: {}", run.stderr);
    assert_ranks_ended(&project);
}
