//! SARIF 2.1.0 (serde-sarif's types): the enabled rules with their documentation, and one
//! result per finding, with its labels as related locations.

use std::collections::HashMap;
use std::io::{self, Write};

use serde_sarif::sarif::{
    ArtifactLocation, Location, Message, MultiformatMessageString, PhysicalLocation, PropertyBag,
    Region, ReportingConfiguration, ReportingDescriptor, Result as SarifResult, ResultLevel, Run,
    Sarif, Tool, ToolComponent,
};

use super::{Report, absolute, cell_note};
use crate::diagnostic::Severity;
use crate::rule_meta::RuleMeta;
use crate::source::SourceFile;

const SCHEMA: &str = "https://json.schemastore.org/sarif-2.1.0.json";

pub fn render(report: &Report<'_>, out: &mut dyn Write) -> io::Result<()> {
    let index: HashMap<&str, usize> = report
        .rules
        .iter()
        .enumerate()
        .map(|(i, rule)| (rule.code.as_str(), i))
        .collect();
    let rules: Vec<ReportingDescriptor> =
        report.rules.iter().map(|rule| descriptor(rule)).collect();

    let mut results = Vec::new();
    for (source, diagnostic) in report.diagnostics() {
        let related: Vec<Location> = diagnostic
            .labels
            .iter()
            .map(|label| location(source, label.range.clone(), Some(label.message.clone())))
            .collect();
        // Regions count lines within the cell in a notebook: the message names the cell.
        let start = source.display_location(diagnostic.range.start);
        let text = format!("{}{}", diagnostic.message, cell_note(&start));
        let mut result = SarifResult::builder()
            .rule_id(diagnostic.rule.code.clone())
            .level(level(diagnostic.severity()))
            .message(Message::builder().text(text).build())
            .locations(vec![location(source, diagnostic.range.clone(), None)])
            .build();
        if let Some(&i) = index.get(diagnostic.rule.code.as_str()) {
            result.rule_index = Some(i as i64);
        }
        if !related.is_empty() {
            result.related_locations = Some(related);
        }
        results.push(result);
    }

    let driver = ToolComponent::builder()
        .name("torchlint")
        .version(env!("CARGO_PKG_VERSION"))
        .semantic_version(env!("CARGO_PKG_VERSION"))
        .information_uri("https://github.com/torchlint/torchlint")
        .rules(rules)
        .build();
    let run = Run::builder()
        .tool(Tool::builder().driver(driver).build())
        .results(results)
        .column_kind(serde_json::json!("unicodeCodePoints"))
        .build();
    let sarif = Sarif::builder()
        .schema(SCHEMA)
        .version(serde_json::json!("2.1.0"))
        .runs(vec![run])
        .build();
    serde_json::to_writer_pretty(&mut *out, &sarif)?;
    writeln!(out)
}

fn descriptor(rule: &RuleMeta) -> ReportingDescriptor {
    let level = match rule.severity {
        Severity::Error => "error",
        Severity::Warning => "warning",
        Severity::Info => "note",
    };
    let markdown = rule.markdown();
    let mut descriptor = ReportingDescriptor::builder()
        .id(rule.code.clone())
        .name(rule.name.clone())
        .short_description(
            MultiformatMessageString::builder()
                .text(rule.summary().to_owned())
                .build(),
        )
        .full_description(
            MultiformatMessageString::builder()
                .text(rule.summary().to_owned())
                .build(),
        )
        .help(
            MultiformatMessageString::builder()
                .text(markdown.clone())
                .markdown(markdown)
                .build(),
        )
        .default_configuration(
            ReportingConfiguration::builder()
                .level(serde_json::json!(level))
                .build(),
        )
        .properties(PropertyBag::builder().tags(vec![rule.pack.clone()]).build())
        .build();
    descriptor.help_uri = rule.url();
    descriptor
}

fn level(severity: Severity) -> ResultLevel {
    match severity {
        Severity::Error => ResultLevel::Error,
        Severity::Warning => ResultLevel::Warning,
        Severity::Info => ResultLevel::Note,
    }
}

fn location(
    source: &SourceFile,
    range: std::ops::Range<usize>,
    message: Option<String>,
) -> Location {
    let (start, end) = source.display_span(&range);
    let uri = url::Url::from_file_path(absolute(source.name()))
        .map(|url| url.to_string())
        .unwrap_or_else(|()| source.name().display().to_string());
    let physical = PhysicalLocation::builder()
        .artifact_location(ArtifactLocation::builder().uri(uri).build())
        .region(
            Region::builder()
                .start_line(start.row as i64)
                .start_column(start.column as i64)
                .end_line(end.row as i64)
                .end_column(end.column as i64)
                .build(),
        )
        .build();
    let mut location = Location::builder().physical_location(physical).build();
    if let Some(message) = message {
        let text = format!("{message}{}", cell_note(&start));
        location.message = Some(Message::builder().text(text).build());
    }
    location
}
