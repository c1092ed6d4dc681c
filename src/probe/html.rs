//! The probe's report as one self-contained HTML page: inline CSS and an inline SVG timeline, no
//! scripts, fonts or anything else fetched, so the page opens offline and reads the same in any
//! browser. Every piece of text from the run (script name, tracebacks, messages) is escaped.

use std::fmt::Write;

use super::budget::Split;
use super::events::Budget;
use super::report::{ProbeReport, WatchedFinding};
use super::verdict::{Class, Status, fmt_bytes};

/// Colours of the findings' hit markers (and their swatches in the table), in finding order.
const FINDING_COLOURS: [&str; 10] = [
    "#d62728", "#1f77b4", "#2ca02c", "#9467bd", "#8c564b", "#e377c2", "#17becf", "#bcbd22",
    "#ff7f0e", "#7f7f7f",
];

/// The timeline's geometry (SVG user units; the SVG scales to the page width).
const WIDTH: f64 = 960.0;
const PLOT_HEIGHT: f64 = 300.0;
/// Room for the y labels and the hit lanes' labels ("TL102 line 1234").
const LEFT: f64 = 100.0;
const RIGHT: f64 = 20.0;
const TOP: f64 = 34.0;
const LANE: f64 = 16.0;
/// Points per curve beyond which it is thinned (keeping each bucket's low and high, so peaks
/// survive): a 10-minute run samples 6,000 counters and 12,000 device readings.
const MAX_POINTS: usize = 1_500;

const STYLE: &str = "body{font:14px/1.45 system-ui,-apple-system,'Segoe UI',sans-serif;margin:24px auto;\
max-width:1100px;padding:0 16px;color:#222}h1{font-size:22px;margin:0 0 12px}h2{font-size:17px;\
margin:28px 0 8px;border-bottom:1px solid #ddd;padding-bottom:4px}h3{font-size:15px;margin:18px 0 4px}\
dl.run{display:grid;grid-template-columns:max-content 1fr;gap:2px 14px;margin:0}dl.run dt{color:#666}\
dl.run dd{margin:0}pre{background:#f6f6f6;border:1px solid #e2e2e2;padding:8px;overflow-x:auto;\
font-size:12px}table{border-collapse:collapse;width:100%}th,td{border-bottom:1px solid #e5e5e5;\
padding:5px 8px;text-align:left;vertical-align:top}th{background:#fafafa;font-weight:600}\
td.num{text-align:right;font-variant-numeric:tabular-nums}.status{font-weight:600;padding:1px 6px;\
border-radius:3px;white-space:nowrap}.confirmed{color:#b71c1c;background:#fdecea}\
.likely{color:#8d4e00;background:#fff4e0}.not-reproduced{color:#1b5e20;background:#e8f5e9}.not-reached{color:#555;background:#eee}\
.swatch{display:inline-block;width:10px;height:10px;border-radius:50%;margin-right:6px}\
td.rule{white-space:nowrap}.muted{color:#666}.warning{color:#8a4b00}svg{width:100%;height:auto;display:block}\
svg text{font:11px system-ui,sans-serif;fill:#444}tr.failed td{color:#b71c1c}";

/// Renders the whole page.
pub fn render(report: &ProbeReport) -> String {
    render_page(report, None)
}

/// The page of a report read back from JSON (`probe merge`): JSON carries no memory series, so
/// `why` stands where the timeline would be.
pub fn render_without_timeline(report: &ProbeReport, why: &str) -> String {
    render_page(report, Some(why))
}

fn render_page(report: &ProbeReport, no_timeline: Option<&str>) -> String {
    let mut page = String::new();
    let title = format!("torchlint probe: {}", report.script);
    let _ = write!(
        page,
        "<!DOCTYPE html>\n<html lang=\"en\">\n<head>\n<meta charset=\"utf-8\">\n\
         <meta name=\"viewport\" content=\"width=device-width, initial-scale=1\">\n\
         <title>{}</title>\n<style>{STYLE}</style>\n</head>\n<body>\n<h1>{}</h1>\n",
        escape(&title),
        escape(&title)
    );
    run_header(&mut page, report);
    page.push_str("<h2>Memory timeline</h2>\n");
    match no_timeline {
        Some(why) => {
            let _ = writeln!(page, "<p class=\"muted\">{}</p>", escape(why));
        }
        None => {
            page.push_str(&timeline(report));
            page.push_str(&by_hit(report));
        }
    }
    verdict_table(&mut page, report);
    evidence(&mut page, report);
    run_summary(&mut page, report);
    page.push_str("</body>\n</html>\n");
    page
}

fn run_header(page: &mut String, report: &ProbeReport) {
    page.push_str("<dl class=\"run\">\n");
    let device = match (&report.device, &report.cpu_mode_reason) {
        (Some(device), _) => format!(
            "GPU {} {} ({}); device memory from {}",
            device.index,
            device.name,
            super::render::device_figures(device),
            device.source.describe()
        ),
        (None, Some(reason)) => format!("CPU mode: {reason}"),
        (None, None) => "CPU mode".to_owned(),
    };
    row(page, "Device", &device);
    if let Some(peak) = super::render::device_peak_shares(report) {
        row(page, "Device at its peak", &peak);
    }
    if let Some(cap) = super::render::memory_cap(report) {
        row(page, "Memory cap", &cap);
    }
    row(
        page,
        "Probe's own footprint",
        &super::render::footprint(report),
    );
    if let Some(post_mortem) = &report.out_of_memory {
        row(
            page,
            "Out of memory",
            &super::render::post_mortem_lines(post_mortem).join("; "),
        );
    }
    let unknown = "unknown".to_owned();
    row(
        page,
        "Command",
        &format!("python {}", report.command.join(" ")),
    );
    let started =
        std::time::UNIX_EPOCH + std::time::Duration::from_secs_f64(report.started.max(0.0));
    row(
        page,
        "Started",
        &humantime::format_rfc3339_seconds(started).to_string(),
    );
    row(page, "torchlint", env!("CARGO_PKG_VERSION"));
    row(
        page,
        "PyTorch",
        report
            .torch
            .as_deref()
            .unwrap_or("not found for this interpreter"),
    );
    row(page, "Python", report.python.as_ref().unwrap_or(&unknown));
    row(
        page,
        "Lines watched with",
        report.mechanism.as_ref().unwrap_or(&unknown),
    );
    row(page, "Duration", &format!("{:.1} s", report.duration));
    row(page, "Run", report.stop.describe());
    if let Some(exit) = &report.exit {
        row(
            page,
            "Script",
            &format!("exited with status {}", exit.status),
        );
    }
    page.push_str("</dl>\n");
    if let Some(traceback) = report
        .exit
        .as_ref()
        .and_then(|exit| exit.traceback.as_ref())
    {
        let _ = writeln!(page, "<pre class=\"traceback\">{}</pre>", escape(traceback));
    }
    for error in &report.runner_errors {
        let _ = writeln!(page, "<p class=\"warning\">warning: {}</p>", escape(error));
    }
}

fn row(page: &mut String, name: &str, value: &str) {
    let _ = writeln!(page, "<dt>{}</dt><dd>{}</dd>", escape(name), escape(value));
}

// ---------------------------------------------------------------------------------------------
// The timeline.

/// One curve: seconds since the script started, bytes.
struct Curve {
    name: &'static str,
    colour: &'static str,
    points: Vec<(f64, f64)>,
}

fn curves(report: &ProbeReport) -> Vec<Curve> {
    let since = |t: f64| t - report.started;
    let from_samples = |read: fn(&super::events::Sample) -> Option<u64>| -> Vec<(f64, f64)> {
        report
            .samples
            .iter()
            .filter_map(|s| read(s).map(|v| (since(s.t), v as f64)))
            .collect()
    };
    let device = report
        .device_samples
        .iter()
        .map(|d| (since(d.t), d.used as f64))
        .collect();
    let mut curves = vec![
        curve("device used (whole device)", "#7b1fa2", device),
        curve("reserved", "#ef6c00", from_samples(|s| s.reserved)),
        curve("allocated", "#1565c0", from_samples(|s| s.allocated)),
    ];
    curves.retain(|curve| !curve.points.is_empty());
    // CPU mode (or torch without CUDA): host memory is the only timeline there is.
    if curves.is_empty() {
        let rss = from_samples(|s| s.rss);
        if !rss.is_empty() {
            curves.push(curve("host RSS", "#2e7d32", rss));
        }
    }
    curves
}

fn curve(name: &'static str, colour: &'static str, points: Vec<(f64, f64)>) -> Curve {
    Curve {
        name,
        colour,
        points,
    }
}

/// Maps seconds and bytes to SVG coordinates.
struct Frame {
    t0: f64,
    t1: f64,
    /// Bytes at the top of the plot, and the unit the axis is labelled in.
    ceiling: f64,
    unit: (&'static str, f64),
}

impl Frame {
    fn x(&self, t: f64) -> f64 {
        LEFT + (t - self.t0) / (self.t1 - self.t0) * (WIDTH - LEFT - RIGHT)
    }

    fn y(&self, bytes: f64) -> f64 {
        TOP + PLOT_HEIGHT - bytes / self.ceiling * PLOT_HEIGHT
    }
}

fn timeline(report: &ProbeReport) -> String {
    let curves = curves(report);
    let hits = &report.hits;
    if curves.is_empty() && hits.is_empty() {
        return "<p class=\"muted\">No memory samples and no hits were recorded: the script ended \
                (or torch was never loaded) before the first sample.</p>\n"
            .to_owned();
    }
    let times = curves
        .iter()
        .flat_map(|c| c.points.iter().map(|p| p.0))
        .chain(hits.iter().map(|h| h.t - report.started));
    let (low, high) = times.fold((0.0f64, report.duration.max(0.0)), |(lo, hi), t| {
        (lo.min(t), hi.max(t))
    });
    let peak = curves
        .iter()
        .flat_map(|c| c.points.iter().map(|p| p.1))
        .fold(0.0f64, f64::max);
    let unit = if peak >= (1u64 << 30) as f64 {
        ("GiB", (1u64 << 30) as f64)
    } else {
        ("MiB", (1u64 << 20) as f64)
    };
    let step = nice_step(peak.max(unit.1) * 1.05 / unit.1, 5);
    let frame = Frame {
        t0: low,
        t1: if high > low { high } else { low + 1.0 },
        ceiling: ((peak.max(unit.1) * 1.05 / unit.1 / step).ceil() * step) * unit.1,
        unit,
    };
    let lanes = lane_rows(report);
    let height = TOP + PLOT_HEIGHT + 42.0 + LANE * lanes.len() as f64 + 8.0;
    let mut svg = String::new();
    let _ = writeln!(
        svg,
        "<svg xmlns=\"http://www.w3.org/2000/svg\" viewBox=\"0 0 {WIDTH} {height}\" role=\"img\" \
         aria-label=\"memory over time, with the hits of each watched line\">"
    );
    axes(&mut svg, &frame, curves.is_empty(), step);
    if !curves.is_empty() {
        budget_areas(&mut svg, &frame, report);
    }
    for curve in &curves {
        let points: Vec<String> = thin(&curve.points)
            .iter()
            .map(|&(t, v)| format!("{:.1},{:.1}", frame.x(t), frame.y(v)))
            .collect();
        let _ = writeln!(
            svg,
            "<polyline fill=\"none\" stroke=\"{}\" stroke-width=\"1.5\" points=\"{}\"><title>{}</title></polyline>",
            curve.colour,
            points.join(" "),
            curve.name
        );
    }
    legend(&mut svg, &curves);
    if !curves.is_empty() {
        budget_bars(&mut svg, &frame, report);
        held_over_time(&mut svg, &frame, report);
    }
    step_markers(&mut svg, &frame, report);
    out_of_memory_marker(&mut svg, &frame, report);
    hit_markers(&mut svg, &frame, report, &lanes, reading_curve(&curves));
    svg.push_str("</svg>\n");
    if curves.is_empty() {
        svg.push_str(
            "<p class=\"muted\">No memory samples were recorded; only the hits are shown.</p>\n",
        );
    }
    svg
}

/// A hit as the by-hit plot places it: its number, seconds since the start, memory then.
type HitReading = (u64, f64, f64);

/// Memory at each hit by hit number, one line per watched line: the hits of a fast loop fall
/// in a sliver of the timeline, on top of each other; here each has its own place, and a line
/// that keeps something per hit climbs.
fn by_hit(report: &ProbeReport) -> String {
    let curves = curves(report);
    let Some(curve) = reading_curve(&curves) else {
        return String::new();
    };
    let lanes = lane_rows(report);
    let series: Vec<(usize, Vec<HitReading>)> = lanes
        .iter()
        .map(|&target| {
            let points = report
                .hits
                .iter()
                .filter(|hit| hit.target == target)
                .filter_map(|hit| {
                    let t = hit.t - report.started;
                    // The hit's own counter, read right after the line ran; the timeline's
                    // last sample before it only where the hit has none (samples come every
                    // 0.1 s: a fast loop's hits would all read the same one).
                    let own = match curve.name {
                        "allocated" => hit.allocated,
                        "host RSS" => hit.rss,
                        _ => None,
                    };
                    own.map(|bytes| bytes as f64)
                        .or_else(|| value_at(curve, t))
                        .map(|value| (hit.n, t, value))
                })
                .collect();
            (target, points)
        })
        .filter(|(_, points): &(usize, Vec<_>)| !points.is_empty())
        .collect();
    if series.is_empty() {
        return String::new();
    }
    let all = series.iter().flat_map(|(_, points)| points);
    let last = all.clone().map(|p| p.0).max().unwrap_or(1).max(2) as f64;
    let low = all.clone().map(|p| p.2).fold(f64::INFINITY, f64::min);
    let high = all.map(|p| p.2).fold(f64::NEG_INFINITY, f64::max);
    // Growth is what this plot is for: the axis spans the values seen, not zero to the peak.
    let span = (high - low).max(1024.0 * 1024.0);
    let (bottom, height) = (TOP + PLOT_HEIGHT / 2.0, PLOT_HEIGHT / 2.0);
    let x = |n: f64| LEFT + (n - 1.0) / (last - 1.0) * (WIDTH - LEFT - RIGHT);
    let y = |value: f64| bottom - (value - low) / span * height;
    let mut svg = format!(
        "<h2>Memory at each hit</h2>\n<svg xmlns=\"http://www.w3.org/2000/svg\" viewBox=\"0 0 {WIDTH} {}\" \
         role=\"img\" aria-label=\"{} at each hit, by hit number\">\n",
        bottom + 40.0,
        curve.name
    );
    let _ = writeln!(
        svg,
        "<g stroke=\"#999\"><line x1=\"{LEFT}\" y1=\"{bottom}\" x2=\"{}\" y2=\"{bottom}\"/>\
         <line x1=\"{LEFT}\" y1=\"{TOP}\" x2=\"{LEFT}\" y2=\"{bottom}\"/></g>\n\
         <text x=\"{}\" y=\"{:.1}\" text-anchor=\"end\">{}</text>\
         <text x=\"{}\" y=\"{:.1}\" text-anchor=\"end\">{}</text>\
         <text x=\"{}\" y=\"{}\" text-anchor=\"middle\">hit number ({} from {} to {})</text>",
        WIDTH - RIGHT,
        LEFT - 6.0,
        bottom + 4.0,
        fmt_bytes(low),
        LEFT - 6.0,
        y(low + span) + 4.0,
        fmt_bytes(low + span),
        (LEFT + WIDTH - RIGHT) / 2.0,
        bottom + 32.0,
        curve.name,
        fmt_bytes(low),
        fmt_bytes(high)
    );
    let hits = nice_step(last - 1.0, 8).max(1.0);
    let mut n = 1.0;
    while n <= last + 1e-9 {
        let _ = writeln!(
            svg,
            "<text x=\"{:.1}\" y=\"{}\" text-anchor=\"middle\">{}</text>",
            x(n),
            bottom + 16.0,
            trim_number(n)
        );
        n += hits;
    }
    for (target, points) in &series {
        let colour = FINDING_COLOURS[target % FINDING_COLOURS.len()];
        let label = lane_label(report, *target);
        let line: Vec<String> = points
            .iter()
            .map(|&(n, _, value)| format!("{:.1},{:.1}", x(n as f64), y(value)))
            .collect();
        let _ = writeln!(
            svg,
            "<polyline fill=\"none\" stroke=\"{colour}\" stroke-width=\"1.5\" points=\"{}\"><title>{}</title></polyline>",
            line.join(" "),
            escape(&label)
        );
        let mut previous = None;
        for &(n, t, value) in points {
            let tooltip = hit_tooltip(&label, t, n, Some((curve, value, previous)));
            previous = Some(value);
            let _ = writeln!(
                svg,
                "<circle class=\"hit-n\" cx=\"{:.1}\" cy=\"{:.1}\" r=\"2.5\" fill=\"{colour}\"><title>{}</title></circle>",
                x(n as f64),
                y(value),
                escape(&tooltip)
            );
        }
    }
    svg.push_str("</svg>\n");
    svg
}

fn axes(svg: &mut String, frame: &Frame, no_curves: bool, step: f64) {
    let bottom = TOP + PLOT_HEIGHT;
    let right = WIDTH - RIGHT;
    let _ = writeln!(
        svg,
        "<g stroke=\"#999\"><line x1=\"{LEFT}\" y1=\"{bottom}\" x2=\"{right}\" y2=\"{bottom}\"/>"
    );
    if !no_curves {
        let _ = writeln!(
            svg,
            "<line x1=\"{LEFT}\" y1=\"{}\" x2=\"{LEFT}\" y2=\"{bottom}\"/>",
            TOP
        );
    }
    svg.push_str("</g>\n");
    let seconds = nice_step(frame.t1 - frame.t0, 8);
    let mut t = (frame.t0 / seconds).ceil() * seconds;
    while t <= frame.t1 + 1e-9 {
        let x = frame.x(t);
        let _ = writeln!(
            svg,
            "<line x1=\"{x:.1}\" y1=\"{bottom}\" x2=\"{x:.1}\" y2=\"{}\" stroke=\"#999\"/><text x=\"{x:.1}\" y=\"{}\" text-anchor=\"middle\">{}</text>",
            bottom + 4.0,
            bottom + 16.0,
            trim_number(t)
        );
        t += seconds;
    }
    let _ = writeln!(
        svg,
        "<text x=\"{}\" y=\"{}\" text-anchor=\"middle\">seconds since the script started</text>",
        (LEFT + right) / 2.0,
        bottom + 32.0
    );
    if no_curves {
        return;
    }
    let (unit, size) = frame.unit;
    let mut value = 0.0;
    while value * size <= frame.ceiling + 1.0 {
        let y = frame.y(value * size);
        let _ = writeln!(
            svg,
            "<line x1=\"{LEFT}\" y1=\"{y:.1}\" x2=\"{right}\" y2=\"{y:.1}\" stroke=\"#eee\"/><text x=\"{}\" y=\"{:.1}\" text-anchor=\"end\">{}</text>",
            LEFT - 6.0,
            y + 4.0,
            trim_number(value)
        );
        value += step;
    }
    let _ = writeln!(
        svg,
        "<text transform=\"translate(16 {}) rotate(-90)\" text-anchor=\"middle\">memory ({unit})</text>",
        TOP + PLOT_HEIGHT / 2.0
    );
}

fn legend(svg: &mut String, curves: &[Curve]) {
    let mut x = LEFT;
    for curve in curves {
        let _ = writeln!(
            svg,
            "<line x1=\"{x}\" y1=\"14\" x2=\"{}\" y2=\"14\" stroke=\"{}\" stroke-width=\"3\"/><text x=\"{}\" y=\"18\">{}</text>",
            x + 18.0,
            curve.colour,
            x + 24.0,
            curve.name
        );
        x += 36.0 + 7.0 * curve.name.len() as f64;
    }
}

/// One lane per watched finding, in finding order (a hit's `target` is its finding's index, as
/// the plan numbers them); hits of a target the report has no finding for get a lane of their own.
fn lane_rows(report: &ProbeReport) -> Vec<usize> {
    let mut lanes: Vec<usize> = (0..report.findings.len()).collect();
    let mut strays: Vec<usize> = report
        .hits
        .iter()
        .map(|h| h.target)
        .filter(|&t| t >= report.findings.len())
        .collect();
    strays.sort_unstable();
    strays.dedup();
    lanes.extend(strays);
    lanes
}

fn lane_label(report: &ProbeReport, target: usize) -> String {
    match report.findings.get(target) {
        Some(watched) => format!("{} line {}", watched.finding.code, watched.finding.line),
        None => format!("target {target}"),
    }
}

/// The curve a hit's tooltip reads memory from: what the allocator holds when there is one,
/// else the driver's or the host's reading.
fn reading_curve(curves: &[Curve]) -> Option<&Curve> {
    curves
        .iter()
        .find(|curve| curve.name == "allocated")
        .or_else(|| curves.last())
}

/// The curve's value at `t` (its last point at or before `t`).
fn value_at(curve: &Curve, t: f64) -> Option<f64> {
    let after = curve.points.partition_point(|point| point.0 <= t);
    after.checked_sub(1).map(|at| curve.points[at].1)
}

/// A hit's tooltip: which line and hit, when, the memory then and its change since the line's
/// previous hit.
fn hit_tooltip(label: &str, t: f64, n: u64, reading: Option<(&Curve, f64, Option<f64>)>) -> String {
    let mut text = format!("{label}, hit {n}: {t:.2} s");
    if let Some((curve, now, before)) = reading {
        text.push_str(&format!(", {} {}", curve.name, fmt_bytes(now)));
        if let Some(before) = before {
            let delta = now - before;
            let sign = if delta < 0.0 { "-" } else { "+" };
            text.push_str(&format!(
                " ({sign}{} since hit {})",
                fmt_bytes(delta.abs()),
                n - 1
            ));
        }
    }
    text
}

/// Colours of the budget's parts, in the order `Split::parts` lists them (optimizer states
/// share one).
const BUDGET_COLOURS: [(&str, &str); 5] = [
    ("parameters", "#455a64"),
    ("gradients", "#78909c"),
    ("optimizer state", "#8d6e63"),
    ("activations and other tensors", "#90caf9"),
    ("cached but free", "#ffe0b2"),
];

/// Colours of the two parts "activations and other tensors" splits into where the allocation
/// stacks were read (`--attribute`): the bars show them, the areas (from samples) cannot.
const SPLIT_COLOURS: [(&str, &str); 2] = [
    (crate::probe::budget::ACTIVATIONS, "#64b5f6"),
    ("other tensors", "#bbdefb"),
];

/// At each budget read on the device, a narrow bar stacked by its parts: what the memory
/// under the curves was made of at that moment.
fn budget_bars(svg: &mut String, frame: &Frame, report: &ProbeReport) {
    for budget in report.budgets.iter().filter(|budget| budget.device) {
        let split = Split::of(budget.clone());
        let x = frame.x(budget.t - report.started) - 3.0;
        let mut base = 0.0;
        for part in &split.parts {
            let colour = BUDGET_COLOURS
                .iter()
                .chain(&SPLIT_COLOURS)
                .find(|(what, _)| part.what.starts_with(what))
                .map_or("#bdbdbd", |(_, colour)| colour);
            let (top, bottom) = (frame.y(base + part.bytes as f64), frame.y(base));
            base += part.bytes as f64;
            let _ = writeln!(
                svg,
                "<rect class=\"budget\" x=\"{x:.1}\" y=\"{top:.1}\" width=\"6\" height=\"{:.1}\" fill=\"{colour}\"><title>{}: {}</title></rect>",
                (bottom - top).max(0.0),
                escape(&part.what),
                fmt_bytes(part.bytes as f64)
            );
        }
    }
}

/// The allocator's curves split by the budget over time, stacked: from each sample's allocated
/// and reserved bytes and the last budget read before it (parameters, gradients and optimizer
/// state change only at a step; what else is allocated is activations and other tensors, the
/// rest of the reserved memory the cache). Drawn from the first budget on, under the curves.
fn budget_areas(svg: &mut String, frame: &Frame, report: &ProbeReport) {
    let budgets: Vec<&Budget> = report.budgets.iter().filter(|b| b.device).collect();
    let mut columns: Vec<(f64, [f64; 5])> = Vec::new();
    for sample in &report.samples {
        let (Some(allocated), Some(reserved)) = (sample.allocated, sample.reserved) else {
            continue;
        };
        let Some(budget) = budgets.iter().rev().find(|budget| budget.t <= sample.t) else {
            continue;
        };
        let allocated = allocated as f64;
        let optimizers: u64 = budget.optimizers.iter().map(|o| o.bytes).sum();
        // Cumulative tops, each within what the allocator held at that sample.
        let mut tops = [0.0; 5];
        let mut top = 0.0;
        for (at, bytes) in [budget.parameters, budget.gradients, optimizers]
            .into_iter()
            .enumerate()
        {
            top = (top + bytes as f64).min(allocated);
            tops[at] = top;
        }
        tops[3] = allocated;
        tops[4] = (reserved as f64).max(allocated);
        columns.push((sample.t - report.started, tops));
    }
    if columns.len() < 2 {
        return;
    }
    // At most about one column per pixel.
    let stride = columns.len().div_ceil(WIDTH as usize).max(1);
    let last = columns.len() - 1;
    let columns: Vec<&(f64, [f64; 5])> = columns
        .iter()
        .enumerate()
        .filter(|(at, _)| at % stride == 0 || *at == last)
        .map(|(_, column)| column)
        .collect();
    for (layer, (what, colour)) in BUDGET_COLOURS.iter().enumerate() {
        let upper = columns
            .iter()
            .map(|(t, tops)| format!("{:.1},{:.1}", frame.x(*t), frame.y(tops[layer])));
        let lower = columns.iter().rev().map(|(t, tops)| {
            let bottom = if layer == 0 { 0.0 } else { tops[layer - 1] };
            format!("{:.1},{:.1}", frame.x(*t), frame.y(bottom))
        });
        let points: Vec<String> = upper.chain(lower).collect();
        let _ = writeln!(
            svg,
            "<polygon class=\"budget-area\" fill=\"{colour}\" fill-opacity=\"0.45\" stroke=\"none\" points=\"{}\"><title>{what}</title></polygon>",
            points.join(" ")
        );
    }
}

/// `--attribute`: the bytes each line the report lists held at each snapshot, dashed, named
/// at its last point.
fn held_over_time(svg: &mut String, frame: &Frame, report: &ProbeReport) {
    let Some(attributed) = &report.attribution else {
        return;
    };
    for (at, line) in attributed.over_time.iter().enumerate() {
        if line.bytes.len() < 2 {
            continue;
        }
        let colour = FINDING_COLOURS[at % FINDING_COLOURS.len()];
        let points: Vec<(f64, f64)> = line
            .bytes
            .iter()
            .map(|&(t, bytes)| (frame.x(t - report.started), frame.y(bytes as f64)))
            .collect();
        let place = escape(&line.place);
        let _ = writeln!(
            svg,
            "<polyline class=\"held-line\" fill=\"none\" stroke=\"{colour}\" stroke-width=\"1.5\" stroke-dasharray=\"5 3\" points=\"{}\"><title>{place}</title></polyline>",
            points
                .iter()
                .map(|(x, y)| format!("{x:.1},{y:.1}"))
                .collect::<Vec<_>>()
                .join(" ")
        );
        let (x, y) = points[points.len() - 1];
        let _ = writeln!(
            svg,
            "<text class=\"held-label\" x=\"{:.1}\" y=\"{:.1}\" text-anchor=\"end\" fill=\"{colour}\">{place}</text>",
            x - 4.0,
            y - 4.0
        );
    }
}

/// A tick at the top of the plot where each snapshotted step started (`--attribute`).
fn step_markers(svg: &mut String, frame: &Frame, report: &ProbeReport) {
    for &(step, t) in &report.steps {
        let x = frame.x(t - report.started);
        let _ = writeln!(
            svg,
            "<line class=\"step\" x1=\"{x:.1}\" y1=\"{TOP}\" x2=\"{x:.1}\" y2=\"{:.1}\" stroke=\"#9e9e9e\"><title>step {step}</title></line>",
            TOP + 6.0
        );
    }
}

/// A red line at the moment the script ran out of memory.
fn out_of_memory_marker(svg: &mut String, frame: &Frame, report: &ProbeReport) {
    if let Some(post_mortem) = &report.out_of_memory {
        let x = frame.x(post_mortem.error.t - report.started);
        let _ = writeln!(
            svg,
            "<line class=\"out-of-memory\" x1=\"{x:.1}\" y1=\"{TOP}\" x2=\"{x:.1}\" y2=\"{:.1}\" stroke=\"#c62828\" stroke-width=\"2\" stroke-dasharray=\"4 3\"><title>{}</title></line>",
            TOP + PLOT_HEIGHT,
            escape(&super::render::post_mortem_lines(post_mortem).join("; "))
        );
    }
}

fn hit_markers(
    svg: &mut String,
    frame: &Frame,
    report: &ProbeReport,
    lanes: &[usize],
    reading: Option<&Curve>,
) {
    let first_lane = TOP + PLOT_HEIGHT + 42.0;
    for (row, &target) in lanes.iter().enumerate() {
        let y = first_lane + LANE * row as f64 + LANE / 2.0;
        let colour = FINDING_COLOURS[target % FINDING_COLOURS.len()];
        let label = lane_label(report, target);
        let _ = writeln!(
            svg,
            "<text x=\"{}\" y=\"{:.1}\" text-anchor=\"end\">{}</text><line x1=\"{LEFT}\" y1=\"{y:.1}\" x2=\"{}\" y2=\"{y:.1}\" stroke=\"#eee\"/>",
            LEFT - 6.0,
            y + 4.0,
            escape(&label),
            WIDTH - RIGHT
        );
        let mut previous: Option<f64> = None;
        for hit in report.hits.iter().filter(|hit| hit.target == target) {
            let t = hit.t - report.started;
            let now = reading.and_then(|curve| value_at(curve, t).map(|value| (curve, value)));
            let tooltip = hit_tooltip(
                &label,
                t,
                hit.n,
                now.map(|(curve, value)| (curve, value, previous)),
            );
            previous = now.map(|(_, value)| value);
            let _ = writeln!(
                svg,
                "<circle class=\"hit\" cx=\"{:.1}\" cy=\"{y:.1}\" r=\"3.5\" fill=\"{colour}\"><title>{}</title></circle>",
                frame.x(t),
                escape(&tooltip)
            );
        }
    }
}

/// Keeps at most `MAX_POINTS` points: each bucket's lowest and highest, in time order.
fn thin(points: &[(f64, f64)]) -> Vec<(f64, f64)> {
    if points.len() <= MAX_POINTS {
        return points.to_vec();
    }
    let bucket = points.len().div_ceil(MAX_POINTS / 2);
    let mut kept = Vec::with_capacity(MAX_POINTS + 2);
    for chunk in points.chunks(bucket) {
        let low = chunk.iter().min_by(|a, b| a.1.total_cmp(&b.1)).copied();
        let high = chunk.iter().max_by(|a, b| a.1.total_cmp(&b.1)).copied();
        let (Some(low), Some(high)) = (low, high) else {
            continue;
        };
        if low.0 <= high.0 {
            kept.extend([low, high]);
        } else {
            kept.extend([high, low]);
        }
    }
    kept
}

/// A round step (1, 2 or 5 × a power of ten) giving about `ticks` ticks over `range`.
fn nice_step(range: f64, ticks: usize) -> f64 {
    let raw = (range / ticks as f64).max(1e-9);
    let magnitude = 10f64.powf(raw.log10().floor());
    let nice = match raw / magnitude {
        n if n <= 1.0 => 1.0,
        n if n <= 2.0 => 2.0,
        n if n <= 5.0 => 5.0,
        _ => 10.0,
    };
    nice * magnitude
}

/// "2", "0.5", "12.5": no trailing zeros.
fn trim_number(value: f64) -> String {
    // A tick computed as -0.0 (a negative start rounded up) reads "0", not "-0".
    let value = if value.abs() < 1e-9 { 0.0 } else { value };
    let text = format!("{value:.2}");
    text.trim_end_matches('0').trim_end_matches('.').to_owned()
}

// ---------------------------------------------------------------------------------------------
// Verdicts, evidence, run summary.

fn verdict_table(page: &mut String, report: &ProbeReport) {
    page.push_str("<h2>Verdicts</h2>\n");
    if report.findings.is_empty() {
        page.push_str("<p class=\"muted\">No finding to watch (none in this script has a runtime signature): the script ran for the run&#39;s numbers below.</p>\n");
    } else {
        page.push_str(
            "<table class=\"verdicts\">\n<thead><tr><th>rule</th><th>line</th><th>status</th><th>class</th>\
             <th>hits</th><th>summary</th><th>projection</th></tr></thead>\n<tbody>\n",
        );
        for (index, watched) in report.findings.iter().enumerate() {
            verdict_row(page, index, watched);
        }
        page.push_str("</tbody>\n</table>\n");
    }
    if !report.unwatched.is_empty() {
        page.push_str("<p class=\"muted\">Not watched (no runtime signature):</p>\n<ul class=\"unwatched\">\n");
        for finding in &report.unwatched {
            let _ = writeln!(
                page,
                "<li>{} line {}: {}</li>",
                escape(&finding.code),
                finding.line,
                escape(&finding.message)
            );
        }
        page.push_str("</ul>\n");
    }
}

fn verdict_row(page: &mut String, index: usize, watched: &WatchedFinding) {
    let verdict = &watched.verdict;
    let (class, word) = status_words(verdict.status);
    let _ = writeln!(
        page,
        "<tr class=\"verdict\"><td class=\"rule\"><span class=\"swatch\" style=\"background:{}\"></span>{}</td>\
         <td class=\"num\">{}</td><td><span class=\"status {class}\">{word}</span></td><td>{}</td>\
         <td class=\"num\">{}</td><td>{}</td><td>{}</td></tr>",
        FINDING_COLOURS[index % FINDING_COLOURS.len()],
        escape(&watched.finding.code),
        watched.finding.line,
        class_words(verdict.class),
        verdict.hits,
        escape(&verdict.summary),
        escape(verdict.projection.as_deref().unwrap_or("—"))
    );
}

fn status_words(status: Status) -> (&'static str, &'static str) {
    match status {
        Status::Confirmed => ("confirmed", "confirmed"),
        Status::Likely => ("likely", "likely"),
        Status::NotReproduced => ("not-reproduced", "not reproduced"),
        Status::NotReached => ("not-reached", "not reached"),
    }
}

fn class_words(class: Class) -> &'static str {
    match class {
        Class::GrowsGpu => "grows (GPU)",
        Class::GrowsHostGraph => "grows (host, autograd graph)",
        Class::GrowsHost => "grows (host)",
        Class::Constant => "constant",
        Class::Spike => "spike",
        Class::None => "—",
    }
}

fn evidence(page: &mut String, report: &ProbeReport) {
    if report.findings.is_empty() {
        return;
    }
    page.push_str("<h2>Evidence</h2>\n");
    for watched in &report.findings {
        let finding = &watched.finding;
        let _ = writeln!(
            page,
            "<h3>{} line {}:{} ({})</h3>\n<p>{}</p>\n<ul class=\"evidence\">",
            escape(&finding.code),
            finding.line,
            finding.column,
            escape(&finding.name),
            escape(&finding.message)
        );
        for line in &watched.verdict.evidence {
            let _ = writeln!(page, "<li>{}</li>", escape(line));
        }
        page.push_str("</ul>\n");
        let _ = writeln!(
            page,
            "<pre class=\"source\">{:>5} | {}</pre>",
            finding.line,
            escape(&finding.source)
        );
        if let Some(fix) = &finding.fix {
            let _ = writeln!(page, "<p class=\"fix\">Fix: {}</p>", escape(fix));
        }
    }
}

fn run_summary(page: &mut String, report: &ProbeReport) {
    page.push_str("<h2>Run summary</h2>\n");
    if report.summary.notes.is_empty() {
        page.push_str("<p class=\"muted\">No run-wide numbers were recorded.</p>\n");
        return;
    }
    page.push_str("<ul class=\"notes\">\n");
    for note in &report.summary.notes {
        let _ = writeln!(page, "<li>{}</li>", escape(note));
    }
    page.push_str("</ul>\n");
    if report.summary.suggest_expandable_segments {
        page.push_str(
            "<p class=\"warning\">The cache holds memory the requests cannot reuse: try \
             <code>PYTORCH_CUDA_ALLOC_CONF=expandable_segments:True</code>.</p>\n",
        );
    }
    ranks_table(page, report);
    let post_mortem = report.out_of_memory.as_ref();
    if let Some(post_mortem) = post_mortem.filter(|p| !p.held_by.is_empty()) {
        lines_table(
            page,
            "held at the out-of-memory error, by the line that allocated it",
            &super::render::held_lines(&post_mortem.held_by),
        );
    }
    for (at, memory) in super::render::memory_sections(report).iter().enumerate() {
        let prefix = &memory.prefix;
        if let Some(attributed) = memory.attribution {
            lines_table(
                page,
                &format!("{prefix}held at the peak, by the line that allocated it"),
                &super::render::held_lines(&attributed.at_peak),
            );
            if !attributed.growing.is_empty() {
                lines_table(
                    page,
                    &format!("{prefix}growing from snapshot to snapshot"),
                    &super::render::growing_lines(&attributed.growing),
                );
            }
        }
        // The error's split (the lowest rank's, as the report's own) before the run's.
        if at == 0
            && let Some(split) = post_mortem.and_then(|p| p.budget.as_ref())
        {
            budget_table(page, split, "");
        }
        if let Some(split) = memory.split {
            budget_table(page, split, prefix);
        }
    }
}

/// A distributed job's ranks: how each ended, the GPU it computed on, its peaks, and memory it
/// put on other ranks' GPUs.
fn ranks_table(page: &mut String, report: &ProbeReport) {
    if report.ranks.is_empty() {
        return;
    }
    page.push_str(
        "<table class=\"ranks\"><caption>ranks (through torch.distributed.run)</caption>\n",
    );
    page.push_str("<tr><th>rank</th><th>ended</th><th>details</th></tr>\n");
    for rank in &report.ranks {
        let (ended, details) = super::render::rank_entry(rank);
        let failed = report.failed_rank == Some(rank.rank);
        let _ = writeln!(
            page,
            "<tr{}><th>{}</th><td>{}</td><td>{}</td></tr>",
            if failed { " class=\"failed\"" } else { "" },
            rank.rank,
            escape(&ended),
            escape(&details.join(", "))
        );
    }
    page.push_str("</table>\n");
}

/// Lines of the user's code as rows of preformatted text under a caption.
fn lines_table(page: &mut String, caption: &str, rows: &[String]) {
    let _ = writeln!(
        page,
        "<table class=\"lines\"><caption>{}</caption>",
        escape(caption)
    );
    for row in rows {
        let _ = writeln!(page, "<tr><td><code>{}</code></td></tr>", escape(row));
    }
    page.push_str("</table>\n");
}

/// A budget: its heading, then a row per part with its bytes and share.
fn budget_table(page: &mut String, split: &Split, prefix: &str) {
    let lines = split.lines();
    let _ = writeln!(
        page,
        "<table class=\"budget\"><caption>{}{}</caption>",
        escape(prefix),
        escape(&lines[0])
    );
    for part in &split.parts {
        let _ = writeln!(
            page,
            "<tr><th>{}</th><td>{}</td></tr>",
            escape(&part.what),
            escape(&fmt_bytes(part.bytes as f64))
        );
    }
    page.push_str("</table>\n");
}

/// Text for HTML element content and attribute values.
fn escape(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    for c in text.chars() {
        match c {
            '&' => out.push_str("&amp;"),
            '<' => out.push_str("&lt;"),
            '>' => out.push_str("&gt;"),
            '"' => out.push_str("&quot;"),
            '\'' => out.push_str("&#39;"),
            _ => out.push(c),
        }
    }
    out
}
