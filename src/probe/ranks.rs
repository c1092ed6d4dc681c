//! A distributed job's report: each rank's events are judged as a run of their own, then the
//! ranks' reports are merged into one, each watched line with a verdict per rank and one that
//! says where the hazard showed ("confirmed on rank 0; not reached on rank 1").

use std::process::ExitStatus;

use serde::{Deserialize, Serialize};

use super::attribution::Attributed;
use super::budget::Split;
use super::report::{ProbeReport, Stop};
use super::verdict::{Status, Verdict};

/// One rank's verdict on a watched line.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct RankVerdict {
    pub rank: u32,
    pub verdict: Verdict,
}

/// How one rank's process ended, for the report's list of ranks.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct RankRun {
    pub rank: u32,
    /// The script's exit status on that rank (None: still running when the job was ended).
    pub status: Option<i32>,
    /// The last line of its traceback, when it raised.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub error: Option<String>,
    /// When it ended, seconds since the epoch: which rank failed first, across hosts too.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub ended: Option<f64>,
    /// The CUDA device its watched lines ran on (the GPU the rank computes on).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub device: Option<u32>,
    /// The most its allocator held on the device, and its host RSS at most.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub peak_allocated: Option<u64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub peak_rss: Option<u64>,
    /// Its memory at its peak, split into parameters, gradients, optimizer state and the rest
    /// (the report's own `budget` is the lowest rank's).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub budget: Option<Split>,
    /// What its process held of each GPU at most, as NVML counts it (with NVML, for a job
    /// the probe watched every GPU of): on a device other than its own, memory this rank put
    /// where another computes.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub held: Vec<Held>,
    /// `--attribute`: the lines of the script holding its device memory, on this rank.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub attribution: Option<Attributed>,
}

/// The most one rank's process held of one GPU.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Held {
    /// The device's CUDA index, numbered as the ranks number them.
    pub device: u32,
    pub bytes: u64,
}

impl RankRun {
    /// What the rank held on GPUs other than the one it computes on.
    pub fn held_elsewhere(&self) -> impl Iterator<Item = &Held> {
        self.held
            .iter()
            .filter(move |held| Some(held.device) != self.device && held.bytes > 0)
    }
}

/// Fills each rank's `held` from what the GPUs' samplers saw of its process (`pids`: rank,
/// pid; `held_by_device`: device index, most held by pid).
pub fn record_held(
    runs: &mut [RankRun],
    pids: &[(u32, u32)],
    held_by_device: &[(u32, std::collections::BTreeMap<u32, u64>)],
) {
    for run in runs {
        let Some(&(_, pid)) = pids.iter().find(|(rank, _)| *rank == run.rank) else {
            continue;
        };
        run.held = held_by_device
            .iter()
            .filter_map(|(device, held)| {
                held.get(&pid).map(|&bytes| Held {
                    device: *device,
                    bytes,
                })
            })
            .collect();
        run.held.sort_by_key(|held| held.device);
    }
}

/// Merges the ranks' reports (`ranks`, each assembled from `frame` and one rank's events) into
/// one report. The run's own numbers (samples, budget, attribution) are the lowest rank's;
/// each watched line gets every rank's verdict, and the first rank that failed decides the
/// job's exit.
pub fn merge(
    frame: ProbeReport,
    ranks: Vec<(u32, ProbeReport)>,
    launcher: Option<ExitStatus>,
) -> ProbeReport {
    let Some((_, first)) = ranks.first() else {
        let mut report = frame;
        report.stop = Stop::RunnerFailed;
        report.runner_errors.push(match launcher {
            Some(status) => format!(
                "no rank started the script: the launcher (torch.distributed.run) ended ({status}); is torch installed for this interpreter?"
            ),
            None => "no rank started the script before the run ended".to_owned(),
        });
        return report;
    };
    let mut merged = first.clone();
    merged.ranks = ranks
        .iter()
        .map(|(rank, report)| RankRun {
            rank: *rank,
            status: report.exit.as_ref().map(|exit| exit.status),
            error: report
                .exit
                .as_ref()
                .and_then(|exit| exit.traceback.as_deref())
                .and_then(|traceback| traceback.trim_end().lines().last())
                .map(str::to_owned),
            ended: report.exit.as_ref().map(|exit| exit.t),
            device: report.hits.iter().rev().find_map(|hit| hit.device),
            peak_allocated: report.summary.peak_allocated,
            peak_rss: report.summary.peak_rss,
            budget: report.budget.clone(),
            held: Vec::new(),
            attribution: report.attribution.clone(),
        })
        .collect();
    // The rank that failed first is why the job failed: the others were ended after it.
    let failed_first = ranks
        .iter()
        .filter(|(_, report)| report.script_failure().is_some())
        .min_by(|(_, a), (_, b)| {
            let time = |report: &ProbeReport| report.exit.as_ref().map_or(f64::MAX, |e| e.t);
            time(a).total_cmp(&time(b))
        });
    if let Some((rank, report)) = failed_first {
        merged.exit = report.exit.clone();
        merged.summary.failure = report.summary.failure.clone();
        merged.failed_rank = Some(*rank);
    }
    merged.runner_errors = ranks
        .iter()
        .flat_map(|(rank, report)| {
            report
                .runner_errors
                .iter()
                .map(move |error| format!("rank {rank}: {error}"))
        })
        .collect();
    for (index, finding) in merged.findings.iter_mut().enumerate() {
        let per_rank: Vec<RankVerdict> = ranks
            .iter()
            .filter_map(|(rank, report)| {
                let verdict = report.findings.get(index)?.verdict.clone();
                Some(RankVerdict {
                    rank: *rank,
                    verdict,
                })
            })
            .collect();
        finding.verdict = merge_verdicts(&per_rank);
        finding.ranks = per_rank;
    }
    merged
}

/// The line's verdict over the job: the strongest rank's (confirmed, then likely, then not
/// reproduced), its summary saying which ranks showed what.
pub fn merge_verdicts(per_rank: &[RankVerdict]) -> Verdict {
    let strongest = per_rank
        .iter()
        .min_by_key(|entry| strength(entry.verdict.status))
        .expect("a job that started has a rank");
    let mut verdict = strongest.verdict.clone();
    let mut groups: Vec<(Status, Vec<u32>)> = Vec::new();
    for entry in per_rank {
        match groups
            .iter_mut()
            .find(|(status, _)| *status == entry.verdict.status)
        {
            Some((_, ranks)) => ranks.push(entry.rank),
            None => groups.push((entry.verdict.status, vec![entry.rank])),
        }
    }
    groups.sort_by_key(|(status, _)| strength(*status));
    let parts: Vec<String> = groups
        .iter()
        .map(|(status, ranks)| {
            let mut part = format!("{} on {}", status_words(*status), rank_list(ranks));
            if *status == strongest.verdict.status {
                part.push_str(&format!(" ({})", strongest.verdict.summary));
            }
            part
        })
        .collect();
    verdict.summary = parts.join("; ");
    verdict.evidence = per_rank
        .iter()
        .flat_map(|entry| {
            entry
                .verdict
                .evidence
                .iter()
                .map(move |line| format!("rank {}: {line}", entry.rank))
        })
        .collect();
    verdict
}

fn strength(status: Status) -> u8 {
    match status {
        Status::Confirmed => 0,
        Status::Likely => 1,
        Status::NotReproduced => 2,
        Status::NotReached => 3,
    }
}

fn status_words(status: Status) -> &'static str {
    match status {
        Status::Confirmed => "confirmed",
        Status::Likely => "likely",
        Status::NotReproduced => "not reproduced",
        Status::NotReached => "not reached",
    }
}

/// `rank 0`, `ranks 0 and 2`, `ranks 1–3`.
fn rank_list(ranks: &[u32]) -> String {
    match ranks {
        [one] => format!("rank {one}"),
        [a, b] => format!("ranks {a} and {b}"),
        _ if ranks.windows(2).all(|pair| pair[1] == pair[0] + 1) => {
            format!("ranks {}–{}", ranks[0], ranks[ranks.len() - 1])
        }
        _ => {
            let list: Vec<String> = ranks.iter().map(u32::to_string).collect();
            format!("ranks {}", list.join(", "))
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::probe::verdict::Class;

    fn verdict(status: Status, summary: &str) -> Verdict {
        Verdict {
            status,
            class: Class::None,
            hits: 30,
            summary: summary.to_owned(),
            evidence: vec![format!("seen: {summary}")],
            projection: None,
            gpu_slope: None,
            host_slope: None,
            node_slope: None,
        }
    }

    fn run(rank: u32, device: Option<u32>) -> RankRun {
        RankRun {
            rank,
            status: Some(0),
            error: None,
            ended: None,
            device,
            peak_allocated: None,
            peak_rss: None,
            budget: None,
            held: Vec::new(),
            attribution: None,
        }
    }

    #[test]
    fn a_rank_holding_memory_on_another_ranks_gpu_is_told_apart_from_its_own() {
        // Rank 1 computes on cuda:1 but its `torch.load` put 1 GiB on cuda:0; rank 0 stayed on
        // its own GPU; rank 2's process never showed up in NVML (no pid: not started).
        let mut runs = vec![run(0, Some(0)), run(1, Some(1)), run(2, Some(2))];
        let held = vec![
            (0, [(100, 2 << 30), (101, 1 << 30)].into_iter().collect()),
            (1, [(101, 3 << 30)].into_iter().collect()),
        ];
        record_held(&mut runs, &[(0, 100), (1, 101)], &held);
        assert_eq!(
            runs[0].held,
            vec![Held {
                device: 0,
                bytes: 2 << 30
            }]
        );
        assert_eq!(runs[0].held_elsewhere().count(), 0);
        let elsewhere: Vec<&Held> = runs[1].held_elsewhere().collect();
        assert_eq!(
            elsewhere,
            vec![&Held {
                device: 0,
                bytes: 1 << 30
            }]
        );
        assert!(runs[2].held.is_empty());
        // Rank 1's own GPU is not "elsewhere"; in JSON every device is listed.
        let json = serde_json::to_value(&runs[1]).unwrap();
        assert_eq!(json["held"].as_array().map(Vec::len), Some(2));
        assert!(
            serde_json::to_value(&runs[2])
                .unwrap()
                .get("held")
                .is_none()
        );
    }

    #[test]
    fn a_line_confirmed_on_one_rank_says_where_and_what_the_others_saw() {
        let merged = merge_verdicts(&[
            RankVerdict {
                rank: 0,
                verdict: verdict(Status::Confirmed, "+8.0 MiB per hit on the GPU"),
            },
            RankVerdict {
                rank: 1,
                verdict: verdict(Status::NotReached, "the line never ran"),
            },
        ]);
        assert_eq!(merged.status, Status::Confirmed);
        assert_eq!(
            merged.summary,
            "confirmed on rank 0 (+8.0 MiB per hit on the GPU); not reached on rank 1"
        );
        assert_eq!(
            merged.evidence,
            [
                "rank 0: seen: +8.0 MiB per hit on the GPU",
                "rank 1: seen: the line never ran"
            ]
        );
    }

    #[test]
    fn ranks_that_agree_are_named_together() {
        let per_rank: Vec<RankVerdict> = (0..4)
            .map(|rank| RankVerdict {
                rank,
                verdict: verdict(Status::NotReproduced, "flat"),
            })
            .collect();
        let merged = merge_verdicts(&per_rank);
        assert_eq!(merged.status, Status::NotReproduced);
        assert_eq!(merged.summary, "not reproduced on ranks 0–3 (flat)");
    }

    #[test]
    fn rank_lists_read_as_prose() {
        assert_eq!(rank_list(&[2]), "rank 2");
        assert_eq!(rank_list(&[0, 2]), "ranks 0 and 2");
        assert_eq!(rank_list(&[1, 2, 3]), "ranks 1–3");
        assert_eq!(rank_list(&[0, 2, 3]), "ranks 0, 2, 3");
    }
}
