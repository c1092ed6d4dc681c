//! The probe's HTML report: one self-contained page that a browser renders as it is.
//!
//! The page is checked as text (escaping, nothing fetched, CPU mode, an empty run) and, where
//! Chromium is installed, rendered headless: its DOM must hold the verdict rows, the timeline and
//! a marker per hit, and a screenshot must come out. Without Chromium that test says it was
//! skipped and passes, unless `TORCHLINT_REQUIRE_CHROMIUM=1`.

mod common;

use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use torchlint::probe::attribution::{Attributed, Growing, Held, OverTime};
use torchlint::probe::budget::Split;
use torchlint::probe::events::{Budget, DeviceSample, Exit, Hit, OptimizerState, Sample, Value};
use torchlint::probe::html;
use torchlint::probe::report::{
    DeviceInfo, FindingRef, Footprint, MemorySource, ProbeReport, Stop, WatchedFinding,
};
use torchlint::probe::verdict::{Class, Slope, Status, Verdict, summarize};

const MIB: u64 = 1 << 20;
const GIB: u64 = 1 << 30;
const STARTED: f64 = 1_700_000_000.0;

fn finding(code: &str, name: &str, line: usize) -> FindingRef {
    FindingRef {
        code: code.to_owned(),
        name: name.to_owned(),
        message: format!("{name} <flagged>"),
        line,
        column: 5,
        source: format!("total += loss  # <{code}>"),
        fix: Some(format!("fix <{name}>")),
    }
}

fn verdict(
    status: Status,
    class: Class,
    hits: u64,
    summary: &str,
    projection: Option<&str>,
) -> Verdict {
    Verdict {
        status,
        class,
        hits,
        summary: summary.to_owned(),
        evidence: vec![
            format!("grad_fn on {hits}/{hits} hits"),
            "container length 5 → 30".to_owned(),
        ],
        projection: projection.map(str::to_owned),
        gpu_slope: Some(Slope {
            per_hit: 8.4 * MIB as f64,
            stderr: 0.1 * MIB as f64,
            hits: 25,
        }),
        host_slope: None,
        node_slope: None,
    }
}

fn hit(target: usize, n: u64, allocated: u64) -> Hit {
    Hit {
        t: STARTED + 1.0 + n as f64 * 0.2,
        target,
        n,
        grad_enabled: Some(true),
        values: vec![Value {
            expr: "total_loss".to_owned(),
            kind: "tensor".to_owned(),
            grad_fn: true,
            ..Value::default()
        }],
        allocated: Some(allocated),
        ..Hit::default()
    }
}

/// A GPU run: a confirmed leak at line 42 (30 hits), a line not reproduced (10 hits), one never
/// reached; a script name and a traceback that try to inject markup.
fn gpu_report() -> ProbeReport {
    let samples: Vec<Sample> = (0..80)
        .map(|i| Sample {
            t: STARTED + i as f64 * 0.1,
            allocated: Some(GIB + i * 8 * MIB),
            reserved: Some(GIB + i * 10 * MIB),
            rss: Some(3 * GIB),
            ..Sample::default()
        })
        .collect();
    let device_samples: Vec<DeviceSample> = (0..170)
        .map(|i| DeviceSample {
            t: STARTED - 0.5 + i as f64 * 0.05,
            used: 2 * GIB + i * 5 * MIB,
            script: Some(GIB + i * 5 * MIB),
            probe: Some(0),
            ..DeviceSample::default()
        })
        .collect();
    let mut hits: Vec<Hit> = (1..=30).map(|n| hit(0, n, GIB + n * 8 * MIB)).collect();
    hits.extend((1..=10).map(|n| hit(1, n, GIB)));
    let summary = summarize(&samples, &device_samples, Some(GIB));
    ProbeReport {
        script: "train<&>\"x\".py".to_owned(),
        command: vec!["train<&>\"x\".py".to_owned(), "--lr".to_owned(), "<1e-3>".to_owned()],
        python: Some("3.12.3".to_owned()),
        torch: Some("2.11.0".to_owned()),
        mechanism: Some("sys.monitoring".to_owned()),
        device: Some(DeviceInfo {
            index: 0,
            name: "NVIDIA H200".to_owned(),
            total: 141 * GIB,
            used_before: Some(GIB),
            source: MemorySource::Nvml,
        }),
        footprint: Footprint { device: Some(0), host_peak_rss: Some(12 * MIB) },
        cpu_mode_reason: None,
        max_memory: None,
        budgets: vec![Budget {
            t: STARTED + 1.5,
            at: "peak".to_owned(),
            device: true,
            parameters: GIB,
            gradients: GIB,
            allocated: Some(3 * GIB),
            reserved: Some(3 * GIB),
            ..Budget::default()
        }],
        steps: vec![(1, STARTED + 0.5), (10, STARTED + 1.0)],
        attribution: Some(Attributed {
            at_peak: vec![Held {
                place: "train.py:42".to_owned(),
                bytes: 6 * GIB,
                share: 0.5,
                findings: vec!["TL102".to_owned()],
            }],
            growing: vec![Growing {
                place: "data<x>.py:7".to_owned(),
                first: 10 * MIB,
                last: 900 * MIB,
                rising: 5,
                snapshots: 6,
                per_step: None,
                findings: Vec::new(),
            }],
            snapshots: 6,
            over_time: vec![
                OverTime {
                    place: "data<x>.py:7".to_owned(),
                    bytes: (0..6)
                        .map(|i| (STARTED + 1.0 + i as f64, (10 + i * 178) * MIB))
                        .collect(),
                },
                OverTime {
                    place: "train.py:42".to_owned(),
                    bytes: vec![(STARTED + 6.0, 6 * GIB)],
                },
            ],
        }),
        budget: Some(Split::of(Budget {
            at: "peak".to_owned(),
            device: true,
            parameters: 2 * GIB,
            gradients: 2 * GIB,
            optimizers: vec![OptimizerState {
                class: "AdamW<x>".to_owned(),
                bytes: 4 * GIB,
            }],
            allocated: Some(12 * GIB),
            reserved: Some(14 * GIB),
            ..Budget::default()
        })),
        findings: vec![
            WatchedFinding {
                finding: finding("TL102", "tensor-accumulated", 42),
                verdict: verdict(
                    Status::Confirmed,
                    Class::GrowsGpu,
                    30,
                    "+8.4 MiB per hit on the GPU (±0.1 MiB), autograd graph +8 nodes per hit",
                    Some("+8.4 MiB per step → 82 GiB after 10,000 steps; 139 GiB free"),
                ),
                ranks: Vec::new(),
            },
            WatchedFinding {
                finding: finding("TL101", "eval-without-no-grad", 57),
                verdict: verdict(Status::NotReproduced, Class::None, 10, "grad was disabled at this line on all 10 hits", None),
                ranks: Vec::new(),
            },
            WatchedFinding {
                finding: finding("TL105", "float64-data", 12),
                verdict: verdict(Status::NotReached, Class::None, 0, "the line never ran within the run", None),
                ranks: Vec::new(),
            },
        ],
        unwatched: vec![finding("TL110", "some-other-rule", 3)],
        summary,
        stop: Stop::ScriptExited,
        out_of_memory: None,
        exit: Some(Exit {
            t: STARTED + 8.0,
            status: 1,
            traceback: Some("Traceback (most recent call last):\n  <script>alert(1)</script>\nRuntimeError: CUDA out of memory".to_owned()),
        }),
        started: STARTED,
        duration: 8.0,
        runner_errors: vec!["line 99 not watched: no code on that line".to_owned()],
        ranks: Vec::new(),
        failed_rank: None,
        samples,
        device_samples,
        hits,
    }
}

#[test]
fn page_is_self_contained_and_escapes_the_run_text() {
    let page = html::render(&gpu_report());
    assert!(page.starts_with("<!DOCTYPE html>"));
    assert!(page.contains("<title>torchlint probe: train&lt;&amp;&gt;&quot;x&quot;.py</title>"));
    assert!(
        page.contains("&lt;script&gt;alert(1)&lt;/script&gt;"),
        "the traceback is escaped"
    );
    assert!(!page.contains("<script"), "no scripts, and none injected");
    let outside: Vec<&str> = page
        .match_indices("http")
        .map(|(at, _)| &page[at..(at + 40).min(page.len())])
        .filter(|link| !link.starts_with("http://www.w3.org/2000/svg"))
        .collect();
    assert!(outside.is_empty(), "nothing is fetched: {outside:?}");
    assert!(page.contains("GPU 0 NVIDIA H200 (141 GiB total, 1.0 GiB in use before the script)"));
    assert!(page.contains("exited with status 1"));
    assert!(
        page.contains(
            "<caption>device memory at its peak: 12.0 GiB allocated, 14.0 GiB reserved</caption>"
        ),
        "{page}"
    );
    assert!(page.contains("<tr><th>optimizer state (AdamW&lt;x&gt;)</th><td>4.0 GiB</td></tr>"));
    assert!(page.contains("<tr><th>activations and other tensors</th><td>4.0 GiB</td></tr>"));
    // The timeline: a bar stacked by the budget's parts where it was read, and step ticks.
    assert_eq!(page.matches("<rect class=\"budget\"").count(), 4, "{page}");
    // And the curves split by it from that read on, stacked: a layer per part.
    assert_eq!(
        page.matches("<polygon class=\"budget-area\"").count(),
        5,
        "{page}"
    );
    assert!(page.contains("<title>activations and other tensors</title></polygon>"));
    assert!(page.contains("<title>parameters: 1.0 GiB</title>"));
    assert!(page.contains("<title>step 10</title>"));
    // The lines the report lists, over time (a line read once has no series to draw).
    assert_eq!(
        page.matches("<polyline class=\"held-line\"").count(),
        1,
        "{page}"
    );
    assert!(page.contains(">data&lt;x&gt;.py:7</text>"), "{page}");
    assert!(
        page.contains("<tr><td><code>train.py:42     6.0 GiB    50%  TL102</code></td></tr>"),
        "{page}"
    );
    assert!(
        page.contains("<code>data&lt;x&gt;.py:7  10.0 MiB → 900 MiB, rising in 5 of 5 snapshots  unflagged growth</code>"),
        "{page}"
    );
    assert!(page.contains("warning: line 99 not watched"));
    assert_eq!(page.matches("<tr class=\"verdict\">").count(), 3);
    assert_eq!(
        page.matches("<circle class=\"hit\"").count(),
        40,
        "one marker per hit"
    );
    // Hits in a short window still each have a place: memory at each hit, by hit number.
    assert!(page.contains("<h2>Memory at each hit</h2>"), "{page}");
    assert_eq!(
        page.matches("<circle class=\"hit-n\"").count(),
        40,
        "{page}"
    );
    // Each hit's own counter, read as the line ended (the leak's 30th hit: 1 GiB + 240 MiB),
    // not the timeline's sample before it.
    assert!(
        page.contains("hit number (allocated from 1.0 GiB to 1.2 GiB)"),
        "{page}"
    );
    // A hit says when, the memory then, and its change since the line's previous hit.
    let hit7 = regex::Regex::new(
        r"<title>TL102 line 42, hit 7: 2\.40 s, allocated [0-9.]+ [GM]iB \(\+[0-9.]+ (MiB|bytes) since hit 6\)</title>",
    )
    .unwrap();
    assert!(hit7.is_match(&page), "{page}");
    // What was run, with which versions, and each finding's line and fix, escaped.
    assert!(
        page.contains(
            "<dt>Command</dt><dd>python train&lt;&amp;&gt;&quot;x&quot;.py --lr &lt;1e-3&gt;</dd>"
        ),
        "{page}"
    );
    assert!(page.contains("<dt>PyTorch</dt><dd>2.11.0</dd>"));
    // Where the device's figures come from, the script's share at the peak, and what the
    // probe itself took (no CUDA context: nothing on the device).
    for row in [
        "1.0 GiB in use before the script); device memory from NVML (whole device, and per process)",
        "<dt>Device at its peak</dt><dd>2.8 GiB in use, 1.8 GiB of it by the script&#39;s processes, 1.0 GiB by other processes and the driver</dd>",
        "<dt>Probe&#39;s own footprint</dt><dd>0 B on the device (no CUDA context), 12.0 MiB peak RSS on the host</dd>",
    ] {
        assert!(page.contains(row), "{row}\n{page}");
    }
    assert!(
        page.contains("<dt>Started</dt><dd>2023-11-14T22:13:20Z</dd>"),
        "{page}"
    );
    assert!(
        page.contains("total += loss  # &lt;TL102&gt;</pre>"),
        "{page}"
    );
    assert!(page.contains("<p class=\"fix\">Fix: fix &lt;"), "{page}");
    for curve in ["device used (whole device)", "reserved", "allocated"] {
        assert!(
            page.contains(&format!("<title>{curve}</title></polyline>")),
            "{curve}"
        );
    }
    assert!(page.contains("memory (GiB)") && page.contains("seconds since the script started"));
    assert!(page.contains("+8.4 MiB per step → 82 GiB after 10,000 steps; 139 GiB free"));
    assert!(
        page.contains("TL110 line 3"),
        "unwatched findings are listed"
    );
}

#[test]
fn the_scripts_share_is_left_out_when_nvml_names_none_of_its_processes() {
    // In a container NVML lists host PIDs: none is below ours, and the share is unknown.
    let mut report = gpu_report();
    for sample in &mut report.device_samples {
        sample.script = Some(0);
    }
    let page = html::render(&report);
    assert!(!page.contains("<dt>Device at its peak</dt>"), "{page}");
}

#[test]
fn cpu_mode_draws_host_memory_and_says_why() {
    let mut report = gpu_report();
    report.device = None;
    report.cpu_mode_reason = Some("no NVIDIA driver (libcuda.so.1 not found)".to_owned());
    report.device_samples.clear();
    for sample in &mut report.samples {
        sample.allocated = None;
        sample.reserved = None;
    }
    let page = html::render(&report);
    assert!(page.contains("CPU mode: no NVIDIA driver (libcuda.so.1 not found)"));
    assert!(page.contains("<title>host RSS</title></polyline>"));
    assert!(!page.contains("<title>allocated</title>"));
}

#[test]
fn a_run_without_samples_or_hits_says_so() {
    let mut report = gpu_report();
    report.samples.clear();
    report.device_samples.clear();
    report.hits.clear();
    report.summary = summarize(&[], &[], None);
    let page = html::render(&report);
    assert!(page.contains("No memory samples and no hits were recorded"));
    assert!(!page.contains("<svg"));
    assert!(page.contains("no memory counters were sampled"));
}

#[test]
fn the_allocator_setting_is_suggested_only_when_the_summary_does() {
    let mut report = gpu_report();
    assert!(!html::render(&report).contains("expandable_segments"));
    report.summary.suggest_expandable_segments = true;
    assert!(
        html::render(&report)
            .contains("<code>PYTORCH_CUDA_ALLOC_CONF=expandable_segments:True</code>")
    );
}

/// A Chromium that answers `--version`, if one is installed.
fn chromium() -> Option<PathBuf> {
    ["chromium", "chromium-browser", "google-chrome"]
        .into_iter()
        .map(PathBuf::from)
        .find(|program| {
            Command::new(program)
                .arg("--version")
                .stdout(Stdio::null())
                .stderr(Stdio::null())
                .status()
                .is_ok_and(|status| status.success())
        })
}

/// Runs headless Chromium on `page` with `extra` arguments; its stdout, within a minute.
fn headless(chromium: &Path, profile: &Path, page: &Path, extra: &[String]) -> String {
    let mut child = Command::new(chromium)
        .args([
            "--headless",
            "--disable-gpu",
            "--no-sandbox",
            "--no-first-run",
            "--disable-dev-shm-usage",
        ])
        .arg(format!("--user-data-dir={}", profile.display()))
        .args(extra)
        .arg(format!("file://{}", page.display()))
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .expect("start chromium");
    let deadline = Instant::now() + Duration::from_secs(60);
    while child.try_wait().expect("wait for chromium").is_none() {
        if Instant::now() > deadline {
            let _ = child.kill();
            panic!("chromium did not finish within a minute");
        }
        std::thread::sleep(Duration::from_millis(100));
    }
    let output = child.wait_with_output().expect("chromium's output");
    String::from_utf8_lossy(&output.stdout).into_owned()
}

#[test]
fn renders_in_headless_chromium() {
    let Some(chromium) = chromium() else {
        let required = std::env::var("TORCHLINT_REQUIRE_CHROMIUM").is_ok_and(|v| v == "1");
        assert!(
            !required,
            "TORCHLINT_REQUIRE_CHROMIUM=1 but no chromium (or chromium-browser, google-chrome) on PATH"
        );
        common::report_skip(
            "renders_in_headless_chromium",
            "needs `chromium` on PATH (apt-get install chromium)",
        );
        return;
    };
    let folder = tempfile::tempdir().expect("temp dir");
    let page = folder.path().join("probe.html");
    std::fs::write(&page, html::render(&gpu_report())).expect("write the page");

    let dom = headless(
        &chromium,
        &folder.path().join("profile-dom"),
        &page,
        &["--dump-dom".to_owned()],
    );
    assert_eq!(
        dom.matches("<tr class=\"verdict\">").count(),
        3,
        "the verdict rows:\n{dom}"
    );
    assert!(dom.contains("<svg"), "the timeline");
    assert_eq!(dom.matches("class=\"hit\"").count(), 40, "a marker per hit");
    assert!(dom.contains("TL102 line 42, hit 7: 2.40 s"));
    assert!(!dom.contains("<script"), "the traceback stayed text");

    let shot = folder.path().join("probe.png");
    let arguments = [
        format!("--screenshot={}", shot.display()),
        "--window-size=1200,1800".to_owned(),
    ];
    headless(
        &chromium,
        &folder.path().join("profile-shot"),
        &page,
        &arguments,
    );
    let png = std::fs::read(&shot).expect("chromium wrote a screenshot");
    assert!(
        png.len() > 10_000,
        "a screenshot of a whole page, not an empty one: {} bytes",
        png.len()
    );
    assert!(png.starts_with(b"\x89PNG\r\n\x1a\n"));
    if let Ok(keep) = std::env::var("TORCHLINT_KEEP_SCREENSHOT") {
        std::fs::copy(&shot, keep).expect("copy the screenshot");
    }
}
