//! Reading rule files: TOML front matter between `+++` lines, then the Markdown documentation
//! in the fixed layout, whose `python flagged` / `python not-flagged` code blocks are examples.

use std::borrow::Cow;
use std::collections::BTreeMap;
use std::path::Path;
use std::sync::{Arc, LazyLock, OnceLock};

use pulldown_cmark::{CodeBlockKind, Event, HeadingLevel, Parser, Tag, TagEnd};
use regex::Regex;
use serde::Deserialize;
use toml::Spanned;

use super::declarative::{DeclarativeRule, RawMatch};
use super::{
    DOC_SECTIONS, DocSection, Example, ExampleKind, FIX_SAFETY_SECTION, Implementation, LAYOUT,
    OptionKind, Origin, RuleMeta, RuleOption, Severity, TEST_CASES_SECTION,
};
use crate::error::FileError;

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "kebab-case")]
struct FrontMatter {
    code: Spanned<String>,
    name: Spanned<String>,
    pack: Spanned<String>,
    severity: Spanned<String>,
    enabled_by_default: bool,
    message: String,
    help: Option<String>,
    implementation: Spanned<String>,
    #[serde(default)]
    supersedes: Vec<Spanned<String>>,
    #[serde(default, rename = "match")]
    matches: Vec<Spanned<RawMatch>>,
    #[serde(default)]
    options: BTreeMap<String, Spanned<RawOption>>,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "kebab-case")]
struct RawOption {
    #[serde(rename = "type")]
    kind: String,
    default: toml::Value,
    doc: String,
}

/// `ACME101`: 1-5 capital letters, then 1-4 digits. (Checked by hand, not by a regex: every
/// run reads the built-in rule files, and compiling a regex cost more than reading one.)
fn is_rule_code(code: &str) -> bool {
    let letters = code.bytes().take_while(u8::is_ascii_uppercase).count();
    let digits = &code.as_bytes()[letters..];
    (1..=5).contains(&letters)
        && (1..=4).contains(&digits.len())
        && digits.iter().all(u8::is_ascii_digit)
}

/// `kebab-case-name`: lowercase words of letters and digits, joined by single hyphens, the
/// first starting with a letter.
fn is_rule_name(name: &str) -> bool {
    name.starts_with(|c: char| c.is_ascii_lowercase())
        && name.split('-').all(|word| {
            !word.is_empty()
                && word
                    .bytes()
                    .all(|b| b.is_ascii_lowercase() || b.is_ascii_digit())
        })
}
static EXPECT_MARKER: LazyLock<Regex> =
    LazyLock::new(|| Regex::new(r"[ \t]*#[ \t]*expect:[ \t]*([A-Za-z0-9, \t]*)$").unwrap());

/// Parses one rule file. `path` is how errors name it; its file stem must be the rule's name
/// and its directory the pack.
pub fn parse_rule_file(origin: Origin, text: &str) -> Result<RuleMeta, FileError> {
    parse(origin, text, None)
}

/// Parses a rule file compiled into the binary, whose documentation is read in place when
/// something asks for it (copying every built-in file's text was most of what a run's start
/// touched of memory).
pub fn parse_builtin_rule_file(
    path: &'static str,
    text: &'static str,
) -> Result<RuleMeta, FileError> {
    parse(Origin::Builtin { path }, text, Some(text))
}

/// `kept`: the text again, when it lives as long as the program (else the documentation keeps
/// a copy).
fn parse(origin: Origin, text: &str, kept: Option<&'static str>) -> Result<RuleMeta, FileError> {
    let path_text = origin.display();
    let path = Path::new(&path_text);
    let error = |offset: Option<usize>, message: String| FileError {
        path: path_text.clone().into(),
        line: offset.map(|offset| line_of(text, offset)),
        message,
        more: Vec::new(),
    };

    let (front, front_offset, _, body_offset) = split_front_matter(text).ok_or_else(|| {
        error(
            Some(0),
            "a rule file starts with TOML front matter between two `+++` lines".to_owned(),
        )
    })?;
    let at = |offset: usize| Some(front_offset + offset);

    let raw: FrontMatter = toml::from_str(front).map_err(|e| {
        error(
            e.span().map(|span| front_offset + span.start),
            e.message().trim().to_owned(),
        )
    })?;

    let code = raw.code.get_ref().clone();
    if !is_rule_code(&code) {
        return Err(error(
            at(raw.code.span().start),
            format!(
                "`{code}` is not a rule code: use 1-5 capital letters and 1-4 digits, like `ACME101`"
            ),
        ));
    }
    if let Some(bad) = raw
        .supersedes
        .iter()
        .find(|code| !is_rule_code(code.get_ref()))
    {
        return Err(error(
            at(bad.span().start),
            format!(
                "`supersedes` lists `{}`, which is not a rule code",
                bad.get_ref()
            ),
        ));
    }
    let name = raw.name.get_ref().clone();
    if !is_rule_name(&name) {
        return Err(error(
            at(raw.name.span().start),
            format!("`{name}` is not a kebab-case rule name"),
        ));
    }
    let stem = path.file_stem().and_then(|s| s.to_str()).unwrap_or("");
    if stem != name {
        return Err(error(
            at(raw.name.span().start),
            format!(
                "the file is named `{stem}.md` but the rule is `{name}`: name the file after the rule"
            ),
        ));
    }
    let pack = raw.pack.get_ref().clone();
    let directory = path
        .parent()
        .and_then(Path::file_name)
        .and_then(|s| s.to_str())
        .unwrap_or("");
    if pack != directory {
        return Err(error(
            at(raw.pack.span().start),
            format!("the rule says pack `{pack}` but sits in the folder `{directory}`"),
        ));
    }
    let severity = Severity::parse(raw.severity.get_ref()).ok_or_else(|| {
        error(
            at(raw.severity.span().start),
            format!(
                "unknown severity `{}` (expected `error`, `warning` or `info`)",
                raw.severity.get_ref()
            ),
        )
    })?;

    let is_user = matches!(origin, Origin::User { .. });
    let implementation = match raw.implementation.get_ref().as_str() {
        "declarative" => {
            // A user pack's patterns are compiled now, so that a bad one is an error at its
            // line; the built-in ones (tested) when they first run.
            let rule = DeclarativeRule::from_raw(raw.matches, front, &raw.message, is_user)
                .map_err(|e| error(at(e.offset), e.message))?;
            Implementation::Declarative(Arc::new(rule))
        }
        "rust" | "engine" if is_user => {
            return Err(error(
                at(raw.implementation.span().start),
                "rules in user packs are declarative: set `implementation = \"declarative\"` and add `[[match]]` tables".to_owned(),
            ));
        }
        "rust" | "engine" if !raw.matches.is_empty() => {
            return Err(error(
                at(raw.matches[0].span().start),
                "`[[match]]` tables belong to declarative rules only".to_owned(),
            ));
        }
        "rust" => Implementation::Rust,
        "engine" => Implementation::Engine,
        other => {
            return Err(error(
                at(raw.implementation.span().start),
                format!("unknown implementation `{other}` (expected `declarative` or `rust`)"),
            ));
        }
    };

    let mut options = Vec::new();
    for (option_name, option) in raw.options {
        let offset = option.span().start;
        let option = option.into_inner();
        let kind = OptionKind::parse(&option.kind).ok_or_else(|| {
            error(
                at(offset),
                format!(
                    "option `{option_name}` has unknown type `{}` (expected boolean, integer, string or list-of-strings)",
                    option.kind
                ),
            )
        })?;
        if !kind.accepts(&option.default) {
            return Err(error(
                at(offset),
                format!(
                    "the default of option `{option_name}` is not a {}",
                    kind.as_str()
                ),
            ));
        }
        options.push(RuleOption {
            name: option_name,
            kind,
            default: option.default,
            doc: option.doc,
        });
    }

    let documentation = Documentation {
        text: kept.map_or_else(|| Cow::Owned(text.to_owned()), Cow::Borrowed),
        body_offset,
        parsed: OnceLock::new(),
    };
    // A user's rule file is checked whole as it loads, so that a bad example is an error at
    // its line; the built-in files are checked by the tests, and parsed when read.
    if !matches!(origin, Origin::Builtin { .. }) {
        documentation
            .parse(&code, &raw.message)
            .map_err(|(offset, message)| error(Some(offset), message))?;
    }

    Ok(RuleMeta {
        code,
        name,
        pack,
        severity,
        enabled_by_default: raw.enabled_by_default,
        message: raw.message,
        help: raw.help,
        documentation,
        options,
        supersedes: raw
            .supersedes
            .into_iter()
            .map(Spanned::into_inner)
            .collect(),
        implementation,
        origin,
    })
}

/// A rule file's documentation, parsed the first time something reads it (`torchlint rule`,
/// SARIF, the tests): a lint reads none of it, and parsing the built-in rules' Markdown was
/// half of what linting a one-line file cost.
#[derive(Debug)]
pub struct Documentation {
    /// The whole rule file: the examples' lines count from its start.
    text: Cow<'static, str>,
    body_offset: usize,
    parsed: OnceLock<Docs>,
}

impl Documentation {
    /// The sections, examples and summary of rule `code` (whose `message` stands in for the
    /// summary without a "What it does" section), or where in the file (a byte offset) and why
    /// they cannot be read.
    pub fn parse(&self, code: &str, message: &str) -> Result<&Docs, (usize, String)> {
        if let Some(docs) = self.parsed.get() {
            return Ok(docs);
        }
        let body = &self.text[self.body_offset..];
        let mut docs = parse_docs(body, code)
            .map_err(|(offset, message)| (self.body_offset + offset, message))?;
        docs.summary = docs
            .sections
            .first()
            .filter(|section| section.title == DOC_SECTIONS[0])
            .map(|section| first_sentence(&section.body))
            .unwrap_or_else(|| message.to_owned());
        // The examples come in the order of the file: one count of lines from each to the
        // next, not one from the start of the file for each (a rule file holds dozens).
        let (mut line, mut counted) = (1, 0);
        for example in &mut docs.examples {
            let offset = (self.body_offset + example.file_line).min(self.text.len());
            if offset < counted {
                (line, counted) = (1, 0);
            }
            line += memchr::memchr_iter(b'\n', &self.text.as_bytes()[counted..offset]).count();
            counted = offset;
            example.file_line = line;
        }
        Ok(self.parsed.get_or_init(|| docs))
    }

    /// The documentation as parsed; a file that cannot be read (a built-in one, which the
    /// tests check) documents nothing beyond its message.
    pub fn docs(&self, code: &str, message: &str) -> &Docs {
        match self.parse(code, message) {
            Ok(docs) => docs,
            Err(_) => self.parsed.get_or_init(|| Docs {
                summary: message.to_owned(),
                ..Docs::default()
            }),
        }
    }
}

/// What a rule file documents.
#[derive(Debug, Default)]
pub struct Docs {
    /// First sentence of "What it does", for one-line listings and SARIF.
    pub summary: String,
    /// The documentation sections, in the fixed order, with example markers removed.
    pub sections: Vec<DocSection>,
    pub examples: Vec<Example>,
}

/// Splits `+++\n<toml>\n+++\n<markdown>`; returns the parts and their byte offsets.
fn split_front_matter(text: &str) -> Option<(&str, usize, &str, usize)> {
    let rest = text
        .strip_prefix("+++\n")
        .or_else(|| text.strip_prefix("+++\r\n"))?;
    let front_offset = text.len() - rest.len();
    let mut offset = 0;
    for line in rest.split_inclusive('\n') {
        if line.trim_end() == "+++" {
            let front = &rest[..offset];
            let body_offset = front_offset + offset + line.len();
            return Some((front, front_offset, &text[body_offset..], body_offset));
        }
        offset += line.len();
    }
    None
}

fn parse_docs(body: &str, code: &str) -> Result<Docs, (usize, String)> {
    // (title, heading start, body start)
    let mut headings: Vec<(String, usize, usize)> = Vec::new();
    let mut examples = Vec::new();
    let mut in_heading: Option<(usize, String)> = None;
    let mut in_code: Option<(usize, String, String)> = None;

    for (event, range) in Parser::new(body).into_offset_iter() {
        match event {
            Event::Start(Tag::Heading { level, .. }) => {
                if level == HeadingLevel::H1 {
                    return Err((
                        range.start,
                        "the rule file must not have a `#` title: `torchlint rule` adds it"
                            .to_owned(),
                    ));
                }
                if level == HeadingLevel::H2 {
                    in_heading = Some((range.start, String::new()));
                }
            }
            Event::End(TagEnd::Heading(HeadingLevel::H2)) => {
                if let Some((start, title)) = in_heading.take() {
                    headings.push((title.trim().to_owned(), start, range.end));
                }
            }
            Event::Start(Tag::CodeBlock(kind)) => {
                let info = match kind {
                    CodeBlockKind::Fenced(info) => info.to_string(),
                    CodeBlockKind::Indented => String::new(),
                };
                in_code = Some((range.start, info, String::new()));
            }
            Event::End(TagEnd::CodeBlock) => {
                if let Some((start, info, content)) = in_code.take()
                    && let Some(example) = example_from_block(start, &info, &content, code)?
                {
                    examples.push(example);
                }
            }
            Event::Text(text) | Event::Code(text) => {
                if let Some((_, title)) = in_heading.as_mut() {
                    title.push_str(&text);
                } else if let Some((_, _, content)) = in_code.as_mut() {
                    content.push_str(&text);
                }
            }
            _ => {}
        }
    }

    if let Some((_, start, _)) = headings.first()
        && !body[..*start].trim().is_empty()
    {
        return Err((
            0,
            format!(
                "text before the first section; the documentation starts with `## {}`",
                DOC_SECTIONS[0]
            ),
        ));
    }

    let mut sections = Vec::new();
    let mut expected_next = 0;
    for (i, (title, heading_start, body_start)) in headings.iter().enumerate() {
        let end = headings.get(i + 1).map_or(body.len(), |next| next.1);
        let is_test_cases = title == TEST_CASES_SECTION;
        if is_test_cases {
            if i + 1 != headings.len() {
                return Err((
                    *heading_start,
                    format!("`## {TEST_CASES_SECTION}` must be the last section"),
                ));
            }
            continue;
        }
        match LAYOUT[expected_next..]
            .iter()
            .position(|known| known == title)
        {
            Some(skip) => expected_next += skip + 1,
            None => {
                let message = if LAYOUT.contains(&title.as_str()) {
                    format!(
                        "section `## {title}` is out of order; the layout is: {}",
                        LAYOUT.join(" / ")
                    )
                } else {
                    format!(
                        "unknown section `## {title}`; the layout is: {} (`## {FIX_SAFETY_SECTION}` only for a rule with a fix, and an optional last `## {TEST_CASES_SECTION}`)",
                        LAYOUT.join(" / ")
                    )
                };
                return Err((*heading_start, message));
            }
        }
        sections.push(DocSection {
            title: title.clone(),
            body: strip_example_markers(&body[*body_start..end]),
        });
    }
    Ok(Docs {
        summary: String::new(),
        sections,
        examples,
    })
}

fn example_from_block(
    fence_offset: usize,
    info: &str,
    content: &str,
    code: &str,
) -> Result<Option<Example>, (usize, String)> {
    let mut words = info.split_whitespace();
    let language = words.next().unwrap_or("");
    if language != "python" && language != "py" {
        return Ok(None);
    }
    let kind = match words.next() {
        Some("flagged") => ExampleKind::Flagged,
        Some("not-flagged") => ExampleKind::NotFlagged,
        _ => {
            return Err((
                fence_offset,
                "mark every Python example ```python flagged``` or ```python not-flagged``` so it runs as a test".to_owned(),
            ));
        }
    };
    let mut expected_lines = Vec::new();
    let mut stripped = String::with_capacity(content.len());
    for (i, line) in content.lines().enumerate() {
        match EXPECT_MARKER.captures(line) {
            Some(captures) => {
                let codes: Vec<&str> = captures[1]
                    .split([',', ' ', '\t'])
                    .filter(|c| !c.is_empty())
                    .collect();
                if codes.is_empty() || codes.iter().any(|c| *c != code) {
                    return Err((
                        fence_offset,
                        format!(
                            "line {} of this example expects `{}`; examples expect findings of their own rule ({code}) only",
                            i + 1,
                            captures[1].trim()
                        ),
                    ));
                }
                expected_lines.push(i + 1);
                stripped.push_str(&line[..captures.get(0).unwrap().start()]);
            }
            None => stripped.push_str(line),
        }
        stripped.push('\n');
    }
    match kind {
        ExampleKind::Flagged if expected_lines.is_empty() => Err((
            fence_offset,
            format!("a flagged example marks each line it expects with `# expect: {code}`"),
        )),
        ExampleKind::NotFlagged if !expected_lines.is_empty() => Err((
            fence_offset,
            "a not-flagged example cannot expect findings".to_owned(),
        )),
        _ => Ok(Some(Example {
            kind,
            code: stripped,
            expected_lines,
            file_line: fence_offset,
        })),
    }
}

/// Removes `# expect: CODE` markers and the `flagged` / `not-flagged` fence words, which are
/// for the tests, not for readers.
fn strip_example_markers(markdown: &str) -> String {
    let mut out = String::with_capacity(markdown.len());
    for line in markdown.lines() {
        let trimmed = line.trim_start();
        if trimmed.starts_with("```") {
            let indent = &line[..line.len() - trimmed.len()];
            let fence: String = trimmed.chars().take_while(|c| *c == '`').collect();
            let language = trimmed[fence.len()..]
                .split_whitespace()
                .next()
                .unwrap_or("");
            out.push_str(&format!("{indent}{fence}{language}"));
        } else if let Some(marker) = EXPECT_MARKER.find(line) {
            out.push_str(&line[..marker.start()]);
        } else {
            out.push_str(line);
        }
        out.push('\n');
    }
    out
}

fn first_sentence(markdown: &str) -> String {
    let paragraph = markdown
        .trim()
        .split("\n\n")
        .next()
        .unwrap_or("")
        .replace('\n', " ");
    match paragraph.find(". ") {
        Some(end) => paragraph[..=end].to_owned(),
        None => paragraph,
    }
}

fn line_of(text: &str, offset: usize) -> usize {
    text[..offset.min(text.len())]
        .bytes()
        .filter(|&b| b == b'\n')
        .count()
        + 1
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn rule_codes_and_names_have_their_shapes() {
        for good in ["A1", "ACME101", "ABCDE1234", "TL100"] {
            assert!(is_rule_code(good), "{good}");
        }
        for bad in [
            "", "A", "101", "acme101", "ABCDEF1", "A12345", "A1B", "A-1", "ÄB1",
        ] {
            assert!(!is_rule_code(bad), "{bad}");
        }
        for good in ["a", "no-print", "float64-data", "a1-b2"] {
            assert!(is_rule_name(good), "{good}");
        }
        for bad in [
            "", "-a", "a-", "a--b", "1a", "No-print", "no_print", "no print",
        ] {
            assert!(!is_rule_name(bad), "{bad}");
        }
    }

    fn user(path: &str) -> Origin {
        Origin::User { path: path.into() }
    }

    const GOOD: &str = r#"+++
code = "ACME001"
name = "no-print"
pack = "acme"
severity = "info"
enabled-by-default = true
message = "`print` in training code"
implementation = "declarative"

[[match]]
pattern = '''(call function: (identifier) @f) @report'''
require = [{ resolves = "f", to = ["print"] }]
+++
## What it does
Flags `print`. It is slow.

```python flagged
print(1)  # expect: ACME001
```
"#;

    #[test]
    fn parses_a_user_rule() {
        let rule = parse_rule_file(user("packs/acme/no-print.md"), GOOD).unwrap();
        assert_eq!(rule.code, "ACME001");
        assert_eq!(rule.summary(), "Flags `print`.");
        assert_eq!(rule.examples().len(), 1);
        assert_eq!(rule.examples()[0].expected_lines, vec![1]);
        assert_eq!(rule.examples()[0].code, "print(1)\n");
        assert_eq!(rule.examples()[0].file_line, 17);
        assert!(!rule.sections()[0].body.contains("expect"));
    }

    #[test]
    fn clauses_with_the_same_pattern_share_it_in_the_query() {
        // A second clause with the first one's pattern and a predicate of its own, and a third
        // with a pattern of its own.
        let more = "[[match]]\npattern = '''(call function: (identifier) @f) @report'''\n\
                    require = [{ resolves = \"f\", to = [\"input\"] }]\n\
                    [[match]]\npattern = '''(call function: (attribute) @f) @report'''\n\
                    require = [{ resolves = \"f\", to = [\"sys.exit\"] }]\n+++\n## What it does";
        let text = GOOD.replace("+++\n## What it does", more);
        let rule = parse_rule_file(user("packs/acme/no-print.md"), &text).unwrap();
        let Implementation::Declarative(spec) = &rule.implementation else {
            panic!("a declarative rule");
        };
        let clauses = spec.clauses();
        assert_eq!(clauses.len(), 3);
        assert_eq!(clauses[0].query.pattern_count(), 2);
        assert_eq!(clauses[0].pattern, clauses[1].pattern);
        assert_ne!(clauses[0].pattern, clauses[2].pattern);
    }

    #[test]
    fn a_clause_needs_the_last_part_of_a_name_each_resolves_accepts() {
        let more = "[[match]]\npattern = '''(with_statement (with_clause (with_item value: (call function: (_) @f)))) @w'''\n\
                    require = [{ resolves = \"f\", to = [\"torch.autograd.detect_anomaly\", \"torch.autograd.anomaly_mode.detect_anomaly\", \"sys.exit\"] }]\n+++\n## What it does";
        let text = GOOD.replace("+++\n## What it does", more);
        let rule = parse_rule_file(user("packs/acme/no-print.md"), &text).unwrap();
        let Implementation::Declarative(spec) = &rule.implementation else {
            panic!("a declarative rule");
        };
        // Nested as deep as it is, the capture still names what the file must spell.
        let words = vec!["detect_anomaly".to_owned(), "exit".to_owned()];
        assert_eq!(spec.words(1), &[words]);
    }

    #[test]
    fn errors_name_the_line() {
        let bad = GOOD.replace("require = [{ resolves", "require = [{ resolve");
        let error = parse_rule_file(user("packs/acme/no-print.md"), &bad).unwrap_err();
        assert_eq!(error.line, Some(12), "{error}");
        assert!(error.message.contains("unknown field `resolve`"), "{error}");

        let bad = GOOD.replace("(identifier) @f", "(identifer) @f");
        let error = parse_rule_file(user("packs/acme/no-print.md"), &bad).unwrap_err();
        assert_eq!(error.line, Some(11), "{error}");
        assert!(error.message.contains("unknown node type"), "{error}");

        let error = parse_rule_file(user("packs/other/no-print.md"), GOOD).unwrap_err();
        assert!(error.message.contains("folder `other`"), "{error}");

        let bad = GOOD.replace("## What it does", "## What it doez");
        let error = parse_rule_file(user("packs/acme/no-print.md"), &bad).unwrap_err();
        assert_eq!(error.line, Some(14), "{error}");
    }

    #[test]
    fn may_be_none_belongs_with_has_argument_alone() {
        let pattern = "(call function: (identifier) @f arguments: (argument_list) @args) @report";
        let rule = |require: &str| {
            GOOD.replace("(call function: (identifier) @f) @report", pattern)
                .replace(
                    "require = [{ resolves = \"f\", to = [\"print\"] }]",
                    require,
                )
        };
        let good =
            rule("require = [{ has-argument = \"args\", keyword = \"file\", may-be-none = true }]");
        parse_rule_file(user("packs/acme/no-print.md"), &good).unwrap();
        for bad in [
            "require = [{ lacks-argument = \"args\", keyword = \"file\", may-be-none = true }]",
            "require = [{ has-argument = \"args\", keyword = \"file\", equals = \"None\", may-be-none = true }]",
        ] {
            let error = parse_rule_file(user("packs/acme/no-print.md"), &rule(bad)).unwrap_err();
            assert!(error.message.contains("may-be-none"), "{error}");
        }
    }
}
