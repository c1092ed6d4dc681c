//! Where the device memory is (`--attribute`): the live memory of a moment by the line of the
//! user's code that allocated it, the lines holding the most at the run's peak and at an
//! out-of-memory error, and the lines whose memory grew from snapshot to snapshot, flagged or
//! not.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};

use super::events::Attribution;
use super::report::ProbeReport;

/// A line holding memory at one moment.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Held {
    /// `train.py:41` for the script's lines, the path for other files; "outside your code" for
    /// memory allocated where no frame of the user's code was on the stack.
    pub place: String,
    pub bytes: u64,
    /// Of every live block's bytes at that moment.
    pub share: f64,
    /// The findings on that line (`TL101`).
    pub findings: Vec<String>,
}

/// A line whose live memory rose across the run's snapshots.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Growing {
    pub place: String,
    pub first: u64,
    pub last: u64,
    /// Snapshots in which the line held more than in the one before, of `snapshots - 1`.
    pub rising: usize,
    pub snapshots: usize,
    /// Bytes per training step, when the snapshots were taken at step boundaries.
    pub per_step: Option<f64>,
    pub findings: Vec<String>,
}

/// What `--attribute` found over the run.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Attributed {
    /// The lines holding the most at the snapshot with the most live memory.
    pub at_peak: Vec<Held>,
    pub growing: Vec<Growing>,
    /// Snapshots read (new peaks of allocated memory, the end of the run).
    pub snapshots: usize,
    /// The bytes each of those lines (held at the peak, or growing) held at every snapshot
    /// that lists it, in time order: the HTML timeline draws them.
    pub over_time: Vec<OverTime>,
}

/// One line's live bytes over the run.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct OverTime {
    pub place: String,
    /// (seconds since the Unix epoch, bytes), at the snapshots that list the line (one that
    /// does not held less than every line it lists).
    pub bytes: Vec<(f64, u64)>,
}

/// Lines drawn over time, at most.
const OVER_TIME: usize = 6;

/// Lines held at one moment that the report lists.
const SHOWN: usize = 8;
/// A line grows when it gains at least this much between its first and last snapshot...
const GROWTH_MIN: u64 = 8 << 20;
/// ...and rises in at least this share of the snapshot-to-snapshot steps.
const RISING_SHARE: f64 = 0.6;

/// The findings of the report by the line they are on, in the script.
pub struct FindingsAt {
    script: PathBuf,
    by_line: BTreeMap<usize, Vec<String>>,
}

impl FindingsAt {
    pub fn of(report: &ProbeReport, script: &Path) -> FindingsAt {
        let mut by_line: BTreeMap<usize, Vec<String>> = BTreeMap::new();
        for finding in report
            .findings
            .iter()
            .map(|watched| &watched.finding)
            .chain(&report.unwatched)
        {
            by_line
                .entry(finding.line)
                .or_default()
                .push(finding.code.clone());
        }
        FindingsAt {
            script: std::fs::canonicalize(script).unwrap_or_else(|_| script.to_owned()),
            by_line,
        }
    }

    fn place(&self, file: &str, line: usize) -> String {
        if file.is_empty() {
            return "outside your code".to_owned();
        }
        let path = Path::new(file);
        if path == self.script {
            let name = path
                .file_name()
                .map_or(file.into(), |n| n.to_string_lossy());
            format!("{name}:{line}")
        } else {
            format!("{file}:{line}")
        }
    }

    fn findings(&self, file: &str, line: usize) -> Vec<String> {
        if Path::new(file) == self.script {
            self.by_line.get(&line).cloned().unwrap_or_default()
        } else {
            Vec::new()
        }
    }
}

fn held(snapshot: &Attribution, findings: &FindingsAt) -> Vec<Held> {
    snapshot
        .lines
        .iter()
        .take(SHOWN)
        .map(|line| Held {
            place: findings.place(&line.file, line.line),
            bytes: line.bytes,
            share: if snapshot.total > 0 {
                line.bytes as f64 / snapshot.total as f64
            } else {
                0.0
            },
            findings: findings.findings(&line.file, line.line),
        })
        .collect()
}

/// The run's attribution: held at the snapshot with the most live memory (not the
/// out-of-memory one: the post-mortem's), and the lines that grew across every snapshot.
pub fn for_run(snapshots: &[Attribution], findings: &FindingsAt) -> Option<Attributed> {
    let peak = snapshots
        .iter()
        .filter(|snapshot| snapshot.at != "out_of_memory")
        .max_by_key(|snapshot| snapshot.total)?;
    let at_peak = held(peak, findings);
    let growing = growing(snapshots, findings);
    let over_time = over_time(snapshots, findings, &at_peak, &growing);
    Some(Attributed {
        at_peak,
        growing,
        snapshots: snapshots.len(),
        over_time,
    })
}

/// The series of the lines the report lists: the growing ones first, then those holding the
/// most at the peak.
fn over_time(
    snapshots: &[Attribution],
    findings: &FindingsAt,
    at_peak: &[Held],
    growing: &[Growing],
) -> Vec<OverTime> {
    let mut places: Vec<&str> = Vec::new();
    for place in growing
        .iter()
        .map(|line| line.place.as_str())
        .chain(at_peak.iter().map(|line| line.place.as_str()))
    {
        if !places.contains(&place) && places.len() < OVER_TIME {
            places.push(place);
        }
    }
    let mut ordered: Vec<&Attribution> = snapshots.iter().collect();
    ordered.sort_by(|a, b| a.t.total_cmp(&b.t));
    places
        .into_iter()
        .map(|place| OverTime {
            place: place.to_owned(),
            bytes: ordered
                .iter()
                .filter_map(|snapshot| {
                    snapshot
                        .lines
                        .iter()
                        .find(|line| findings.place(&line.file, line.line) == place)
                        .map(|line| (snapshot.t, line.bytes))
                })
                .collect(),
        })
        .collect()
}

/// The lines holding the memory when the script ran out of it.
pub fn at_out_of_memory(snapshots: &[Attribution], findings: &FindingsAt) -> Vec<Held> {
    snapshots
        .iter()
        .rev()
        .find(|snapshot| snapshot.at == "out_of_memory")
        .map(|snapshot| held(snapshot, findings))
        .unwrap_or_default()
}

/// Lines whose live bytes rose from snapshot to snapshot: counted from what was already live,
/// so a line that allocates the same every step does not grow, whatever its peak. A line
/// missing from a snapshot held less than the lines it lists. With snapshots at step
/// boundaries (the training loop's header), those alone, and growth per step.
fn growing(snapshots: &[Attribution], findings: &FindingsAt) -> Vec<Growing> {
    let steps: Vec<&Attribution> = snapshots
        .iter()
        .filter(|snapshot| snapshot.step.is_some())
        .collect();
    let mut ordered: Vec<&Attribution> = if steps.len() >= 3 {
        steps
    } else {
        snapshots.iter().collect()
    };
    if ordered.len() < 3 {
        return Vec::new();
    }
    ordered.sort_by(|a, b| a.t.total_cmp(&b.t));
    let step_span = match (
        ordered.first().and_then(|s| s.step),
        ordered.last().and_then(|s| s.step),
    ) {
        (Some(first), Some(last)) if last > first => Some((last - first) as f64),
        _ => None,
    };
    let mut series: BTreeMap<(&str, usize), Vec<u64>> = BTreeMap::new();
    for (at, snapshot) in ordered.iter().enumerate() {
        for line in &snapshot.lines {
            let values = series
                .entry((line.file.as_str(), line.line))
                .or_insert_with(|| vec![0; ordered.len()]);
            values[at] = line.bytes;
        }
    }
    let mut grown: Vec<Growing> = series
        .into_iter()
        .filter(|((file, _), _)| !file.is_empty())
        .filter_map(|((file, line), values)| {
            let first = *values.first()?;
            let last = *values.last()?;
            let rising = values.windows(2).filter(|pair| pair[1] > pair[0]).count();
            let steps = values.len() - 1;
            (last >= first + GROWTH_MIN && rising as f64 >= RISING_SHARE * steps as f64).then(
                || Growing {
                    place: findings.place(file, line),
                    first,
                    last,
                    rising,
                    snapshots: values.len(),
                    per_step: step_span.map(|span| (last - first) as f64 / span),
                    findings: findings.findings(file, line),
                },
            )
        })
        .collect();
    grown.sort_by_key(|g| std::cmp::Reverse(g.last - g.first));
    grown.truncate(SHOWN);
    grown
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::probe::events::AllocatedAt;

    const MIB: u64 = 1 << 20;

    fn findings() -> FindingsAt {
        FindingsAt {
            script: PathBuf::from("/w/train.py"),
            by_line: BTreeMap::from([(26, vec!["TL101".to_owned()])]),
        }
    }

    fn snapshot(t: f64, at: &str, lines: &[(&str, usize, u64)]) -> Attribution {
        Attribution {
            t,
            at: at.to_owned(),
            step: None,
            in_forward: 0,
            total: lines.iter().map(|(_, _, bytes)| bytes).sum(),
            lines: lines
                .iter()
                .map(|&(file, line, bytes)| AllocatedAt {
                    file: file.to_owned(),
                    line,
                    bytes,
                    blocks: 1,
                })
                .collect(),
        }
    }

    #[test]
    fn the_peak_is_held_by_its_lines_and_growth_is_counted_from_what_was_live() {
        let snapshots = [
            snapshot(
                1.0,
                "peak",
                &[("/w/train.py", 9, 400 * MIB), ("/w/train.py", 26, 50 * MIB)],
            ),
            snapshot(
                2.0,
                "peak",
                &[
                    ("/w/train.py", 9, 400 * MIB),
                    ("/w/train.py", 26, 300 * MIB),
                ],
            ),
            snapshot(
                3.0,
                "peak",
                &[
                    ("/w/train.py", 26, 650 * MIB),
                    ("/w/train.py", 9, 400 * MIB),
                    ("/w/lib/data.py", 3, 30 * MIB),
                    ("", 0, 20 * MIB),
                ],
            ),
            snapshot(4.0, "out_of_memory", &[("/w/train.py", 26, 900 * MIB)]),
        ];
        let found = for_run(&snapshots, &findings()).unwrap();
        assert_eq!(found.snapshots, 4);
        let places: Vec<&str> = found.at_peak.iter().map(|h| h.place.as_str()).collect();
        assert_eq!(
            places,
            [
                "train.py:26",
                "train.py:9",
                "/w/lib/data.py:3",
                "outside your code"
            ]
        );
        assert_eq!(found.at_peak[0].findings, ["TL101"]);
        assert!((found.at_peak[0].share - 650.0 / 1100.0).abs() < 1e-9);
        // Line 9 holds the most at first, the same every time: not growth.
        assert_eq!(found.growing.len(), 1, "{:?}", found.growing);
        assert_eq!(found.growing[0].place, "train.py:26");
        assert_eq!(
            (found.growing[0].first, found.growing[0].last),
            (50 * MIB, 900 * MIB)
        );
        assert_eq!(found.growing[0].per_step, None, "no step boundaries");
        let at_error = at_out_of_memory(&snapshots, &findings());
        assert_eq!(at_error[0].place, "train.py:26");
        assert_eq!(at_error[0].share, 1.0);
    }

    #[test]
    fn snapshots_at_step_boundaries_give_growth_per_step() {
        let at_step = |t: f64, step: u64, bytes: u64| Attribution {
            step: Some(step),
            ..snapshot(
                t,
                "step",
                &[("/w/train.py", 26, bytes), ("/w/train.py", 9, 400 * MIB)],
            )
        };
        let snapshots = [
            at_step(1.0, 1, 10 * MIB),
            at_step(2.0, 2, 20 * MIB),
            snapshot(2.5, "peak", &[("/w/train.py", 26, 25 * MIB)]),
            at_step(3.0, 10, 100 * MIB),
        ];
        let found = for_run(&snapshots, &findings()).unwrap();
        assert_eq!(found.growing.len(), 1, "{:?}", found.growing);
        let growth = &found.growing[0];
        assert_eq!(
            (growth.first, growth.last, growth.snapshots),
            (10 * MIB, 100 * MIB, 3)
        );
        assert_eq!(growth.per_step, Some(10.0 * MIB as f64));
    }
}
