//! `torchlint probe merge`: one report for a distributed job that ran on several hosts, from
//! the JSON report each host's probe wrote (`--output-format json`) for the ranks it ran.
//!
//! Each host's report already holds its ranks' verdicts per watched line; merging puts every
//! rank's verdicts side by side and judges the line over the whole job again
//! ([`super::ranks::merge_verdicts`]), as one host's probe does for its own ranks.

use serde::Deserialize;
use serde_json::Value;

use super::ranks::{RankVerdict, merge_verdicts};
use super::report::ProbeReport;

/// A host's report, named by where it was read from (for the errors).
pub struct HostReport {
    pub name: String,
    pub report: Value,
}

/// Merges the hosts' reports into one, in the JSON report's shape: the first report is the
/// frame (script, device, run), `ranks` and each finding's `ranks` hold every host's, and each
/// finding's `verdict` is judged over all of them.
pub fn merge(hosts: Vec<HostReport>) -> Result<Value, String> {
    let Some(first) = hosts.first() else {
        return Err("name the JSON reports to merge, one per host".to_owned());
    };
    let script = first.report["script"].clone();
    let mut ranks: Vec<Value> = Vec::new();
    for host in &hosts {
        if host.report["script"] != script {
            return Err(format!(
                "{}: a report of {}, not of {script} like {}",
                host.name, host.report["script"], first.name
            ));
        }
        let Some(host_ranks) = host.report["ranks"].as_array() else {
            return Err(format!(
                "{}: not the report of a distributed job (it has no `ranks`): probe each host with --nproc-per-node or a launcher command line, and --output-format json",
                host.name
            ));
        };
        for rank in host_ranks {
            if ranks.iter().any(|seen| seen["rank"] == rank["rank"]) {
                return Err(format!(
                    "{}: rank {} is in two of the reports",
                    host.name, rank["rank"]
                ));
            }
            ranks.push(rank.clone());
        }
    }
    ranks.sort_by_key(|rank| rank["rank"].as_u64());

    let mut merged = first.report.clone();
    let findings = merged["findings"]
        .as_array_mut()
        .ok_or_else(|| format!("{}: no `findings` in the report", first.name))?;
    for finding in findings.iter_mut() {
        let mut per_rank: Vec<RankVerdict> = Vec::new();
        for host in &hosts {
            let same = host.report["findings"].as_array().and_then(|list| {
                list.iter().find(|other| {
                    other["code"] == finding["code"] && other["line"] == finding["line"]
                })
            });
            if let Some(same) = same {
                let verdicts: Vec<RankVerdict> = serde_json::from_value(same["ranks"].clone())
                    .map_err(|error| {
                        format!("{}: unreadable verdicts per rank ({error})", host.name)
                    })?;
                per_rank.extend(verdicts);
            }
        }
        per_rank.sort_by_key(|entry| entry.rank);
        if per_rank.is_empty() {
            continue;
        }
        finding["verdict"] =
            serde_json::to_value(merge_verdicts(&per_rank)).map_err(|error| error.to_string())?;
        finding["ranks"] = serde_json::to_value(&per_rank).map_err(|error| error.to_string())?;
    }
    // The rank that failed first, on whichever host.
    let failed_first = ranks
        .iter()
        .filter(|rank| rank["status"].as_i64().is_some_and(|status| status != 0))
        .min_by(|a, b| {
            let ended = |rank: &Value| rank["ended"].as_f64().unwrap_or(f64::MAX);
            ended(a).total_cmp(&ended(b))
        });
    merged["failed_rank"] = failed_first.map_or(Value::Null, |rank| rank["rank"].clone());
    if let Some(failed) = failed_first
        && let Some(host) = hosts
            .iter()
            .find(|host| host.report["failed_rank"] == failed["rank"])
    {
        merged["exit"] = host.report["exit"].clone();
    }
    merged["runner_errors"] = hosts
        .iter()
        .flat_map(|host| {
            host.report["runner_errors"]
                .as_array()
                .cloned()
                .unwrap_or_default()
        })
        .collect();
    merged["ranks"] = Value::Array(ranks);
    merged["hosts"] = hosts
        .iter()
        .map(|host| Value::String(host.name.clone()))
        .collect();
    Ok(merged)
}

/// Which host ran which ranks, for the merged report's run summary: `hosts: node0.json (rank 0),
/// node1.json (ranks 1 and 2)`.
pub fn hosts_line(hosts: &[HostReport]) -> String {
    let hosts: Vec<String> = hosts
        .iter()
        .map(|host| {
            let ranks: Vec<String> = (host.report["ranks"].as_array().into_iter().flatten())
                .map(|rank| rank["rank"].to_string())
                .collect();
            match ranks.as_slice() {
                [] => host.name.clone(),
                [rank] => format!("{} (rank {rank})", host.name),
                [rest @ .., last] => {
                    format!("{} (ranks {} and {last})", host.name, rest.join(", "))
                }
            }
        })
        .collect();
    format!("hosts: {}", hosts.join(", "))
}

/// The merged report as the probe's own report type, to render as `probe` does: the hosts'
/// JSON reports carry the verdicts and the run's numbers, not the memory series the HTML
/// timeline draws.
pub fn to_report(merged: &Value, hosts_line: String) -> Result<ProbeReport, String> {
    let mut report = ProbeReport::deserialize(merged)
        .map_err(|error| format!("cannot read the merged report back ({error})"))?;
    report.summary.failure = report.exit.as_ref().and_then(|exit| exit.traceback.clone());
    report.summary.notes.insert(0, hosts_line);
    Ok(report)
}

/// The exit status `torchlint probe` would give the merged job: the failed rank's status, else
/// 1 when a watched line is confirmed, else 0.
pub fn exit_code(merged: &Value) -> u8 {
    if let Some(status) = merged["exit"]["status"].as_i64().filter(|s| *s != 0) {
        return u8::try_from(status).unwrap_or(1);
    }
    let confirmed = merged["findings"].as_array().is_some_and(|findings| {
        findings
            .iter()
            .any(|finding| finding["verdict"]["status"] == "confirmed")
    });
    u8::from(confirmed)
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn verdict(status: &str, summary: &str) -> Value {
        json!({"status": status, "class": "none", "hits": 30, "summary": summary,
               "evidence": [], "projection": null, "gpu_slope": null, "host_slope": null,
               "node_slope": null})
    }

    fn host(name: &str, ranks: &[(u64, &str, i64)], failed: Option<u64>) -> HostReport {
        let findings = json!([{
            "code": "TL101", "line": 28,
            "verdict": verdict("not-reached", "-"),
            "ranks": ranks.iter().map(|(rank, status, _)| json!({
                "rank": rank,
                "verdict": verdict(status, if *status == "confirmed" { "+5 nodes per hit" } else { "never ran" }),
            })).collect::<Vec<_>>(),
        }]);
        HostReport {
            name: name.to_owned(),
            report: json!({
                "script": "train.py",
                "findings": findings,
                "ranks": ranks.iter().map(|(rank, _, exit)| json!({"rank": rank, "status": exit, "ended": 100.0 + *rank as f64})).collect::<Vec<_>>(),
                "failed_rank": failed,
                "exit": {"status": ranks[0].2, "t": 100.0},
                "runner_errors": [],
            }),
        }
    }

    #[test]
    fn two_hosts_make_one_job_with_every_ranks_verdict() {
        let merged = merge(vec![
            host(
                "node0.json",
                &[(0, "confirmed", 0), (1, "not-reached", 0)],
                None,
            ),
            host(
                "node1.json",
                &[(2, "not-reached", 0), (3, "not-reached", 0)],
                None,
            ),
        ])
        .unwrap();
        let ranks: Vec<u64> = merged["ranks"]
            .as_array()
            .unwrap()
            .iter()
            .map(|rank| rank["rank"].as_u64().unwrap())
            .collect();
        assert_eq!(ranks, [0, 1, 2, 3]);
        let finding = &merged["findings"][0];
        assert_eq!(finding["ranks"].as_array().unwrap().len(), 4);
        assert_eq!(
            finding["verdict"]["summary"],
            "confirmed on rank 0 (+5 nodes per hit); not reached on ranks 1–3"
        );
        assert_eq!(merged["hosts"], json!(["node0.json", "node1.json"]));
        assert_eq!(exit_code(&merged), 1);
    }

    #[test]
    fn the_rank_that_failed_first_on_any_host_is_the_jobs_failure() {
        let merged = merge(vec![
            host("node0.json", &[(0, "not-reached", 0)], None),
            host("node1.json", &[(1, "not-reached", 3)], Some(1)),
        ])
        .unwrap();
        assert_eq!(merged["failed_rank"], 1);
        assert_eq!(exit_code(&merged), 3);
    }

    #[test]
    fn the_hosts_line_says_which_host_ran_which_ranks() {
        let hosts = [
            host("node0.json", &[(0, "confirmed", 0)], None),
            host(
                "node1.json",
                &[
                    (1, "confirmed", 0),
                    (2, "confirmed", 0),
                    (3, "confirmed", 0),
                ],
                None,
            ),
        ];
        assert_eq!(
            hosts_line(&hosts),
            "hosts: node0.json (rank 0), node1.json (ranks 1, 2 and 3)"
        );
        // These reports lack what the probe's own report has (command, summary, ...): the
        // text report says it cannot read them back rather than guessing.
        let merged = merge(hosts.into_iter().collect()).unwrap();
        let error = to_report(&merged, String::new()).err().unwrap();
        assert!(
            error.starts_with("cannot read the merged report back ("),
            "{error}"
        );
    }

    #[test]
    fn reports_that_do_not_belong_together_are_refused() {
        let mut other = host("b.json", &[(1, "confirmed", 0)], None);
        other.report["script"] = json!("eval.py");
        let error = merge(vec![host("a.json", &[(0, "confirmed", 0)], None), other])
            .err()
            .unwrap();
        assert!(error.contains("b.json: a report of \"eval.py\""), "{error}");
        let error = merge(vec![
            host("a.json", &[(0, "confirmed", 0)], None),
            host("b.json", &[(0, "confirmed", 0)], None),
        ])
        .err()
        .unwrap();
        assert!(error.contains("rank 0 is in two of the reports"), "{error}");
        let mut single = host("c.json", &[(0, "confirmed", 0)], None);
        single.report["ranks"] = Value::Null;
        let error = merge(vec![single]).err().unwrap();
        assert!(
            error.contains("not the report of a distributed job"),
            "{error}"
        );
    }
}
