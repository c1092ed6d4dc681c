//! From the engine's findings to LSP: diagnostics, quick fixes ("ignore for this line", the
//! rule's own fix) and hover text.

use std::collections::HashMap;

use lsp_types::{
    CodeAction, CodeActionKind, CodeActionOrCommand, CodeDescription, DiagnosticRelatedInformation,
    DiagnosticSeverity, Hover, HoverContents, Location, MarkupContent, MarkupKind, NumberOrString,
    Position, Range, TextEdit, Uri, WorkspaceEdit,
};

use super::document::{Document, Encoding};
use crate::diagnostic::{Applicability, Diagnostic, Severity};

pub fn diagnostic(
    found: &Diagnostic,
    document: &Document,
    uri: &Uri,
    encoding: Encoding,
) -> lsp_types::Diagnostic {
    let related: Vec<DiagnosticRelatedInformation> = found
        .labels
        .iter()
        .map(|label| DiagnosticRelatedInformation {
            location: Location::new(uri.clone(), document.range(&label.range, encoding)),
            message: label.message.clone(),
        })
        .collect();
    let mut message = found.message.clone();
    if let Some(help) = &found.help {
        message.push_str("\nhelp: ");
        message.push_str(help);
    }
    lsp_types::Diagnostic {
        range: document.range(&found.range, encoding),
        severity: Some(match found.severity() {
            Severity::Error => DiagnosticSeverity::ERROR,
            Severity::Warning => DiagnosticSeverity::WARNING,
            Severity::Info => DiagnosticSeverity::INFORMATION,
        }),
        code: Some(NumberOrString::String(found.rule.code.clone())),
        code_description: found
            .rule
            .url()
            .and_then(|url| url.parse::<Uri>().ok())
            .map(|href| CodeDescription { href }),
        source: Some("torchlint".to_owned()),
        message,
        related_information: (!related.is_empty()).then_some(related),
        tags: None,
        data: None,
    }
}

/// Quick fixes for the findings that touch `range`: the rule's fix, and a suppression comment.
/// The kind of the action that applies every fix of a document (on save, when the editor
/// asks for `source.fixAll`).
pub const FIX_ALL: &str = "source.fixAll.torchlint";

/// The code actions for `range`: each finding's fix (its rule's; "(unsafe)" when it may change
/// what the code does, and preferred only when safe) and its suppressions; and, when the
/// client asks for source actions (`only` names `source` or `source.fixAll`), one action
/// applying every safe fix of the document (unsafe ones too with `unsafe_fixes`).
pub fn code_actions(
    found: &[Diagnostic],
    document: &Document,
    uri: &Uri,
    range: Range,
    encoding: Encoding,
    only: Option<&[CodeActionKind]>,
    unsafe_fixes: bool,
) -> Vec<CodeActionOrCommand> {
    let mut actions = Vec::new();
    if let Some(only) = only {
        if only.iter().any(|kind| FIX_ALL.starts_with(kind.as_str())) {
            actions.extend(fix_all(found, document, uri, encoding, unsafe_fixes));
        }
        if !only.contains(&CodeActionKind::QUICKFIX) {
            return actions;
        }
    }
    let wanted = document.offset(range.start, encoding)..document.offset(range.end, encoding);
    for diagnostic in found.iter().filter(|d| touches(&d.range, &wanted)) {
        let lsp_diagnostic = self::diagnostic(diagnostic, document, uri, encoding);
        if let Some(fix) = diagnostic
            .fix
            .as_ref()
            .filter(|fix| fix.applicability != Applicability::DisplayOnly)
        {
            let edits = fix
                .edits
                .iter()
                .map(|edit| {
                    TextEdit::new(document.range(&edit.range, encoding), edit.content.clone())
                })
                .collect();
            let safe = fix.applicability == Applicability::Safe;
            actions.push(action(
                format!(
                    "{}: {}{}",
                    diagnostic.rule.code,
                    fix.message,
                    if safe { "" } else { " (unsafe)" }
                ),
                uri,
                edits,
                &lsp_diagnostic,
                safe,
            ));
        }
        let edit = suppression_edit(document, diagnostic, encoding);
        actions.push(action(
            format!("Ignore {} for this line", diagnostic.rule.code),
            uri,
            vec![edit],
            &lsp_diagnostic,
            false,
        ));
    }
    // Then, once per rule, the whole file.
    let mut codes: Vec<&str> = Vec::new();
    for diagnostic in found.iter().filter(|d| touches(&d.range, &wanted)) {
        let code = diagnostic.rule.code.as_str();
        if codes.contains(&code) {
            continue;
        }
        codes.push(code);
        actions.push(action(
            format!("Ignore {code} for this file"),
            uri,
            vec![file_suppression_edit(document, code, encoding)],
            &self::diagnostic(diagnostic, document, uri, encoding),
            false,
        ));
    }
    actions
}

/// `source.fixAll.torchlint`: the document with its allowed fixes applied together (as
/// `check --fix` applies one round), as one edit of the whole text; none when nothing applies.
fn fix_all(
    found: &[Diagnostic],
    document: &Document,
    uri: &Uri,
    encoding: Encoding,
    unsafe_fixes: bool,
) -> Option<CodeActionOrCommand> {
    let allowed = crate::fix::Allowed::with_unsafe(unsafe_fixes);
    let applied = crate::fix::apply(&document.text, found, allowed)?;
    let whole = document.range(&(0..document.text.len()), encoding);
    Some(CodeActionOrCommand::CodeAction(CodeAction {
        title: format!(
            "torchlint: fix all ({} fix{})",
            applied.fixed.len(),
            if applied.fixed.len() == 1 { "" } else { "es" }
        ),
        kind: Some(CodeActionKind::new(FIX_ALL)),
        edit: Some(WorkspaceEdit {
            changes: Some(HashMap::from([(
                uri.clone(),
                vec![TextEdit::new(whole, applied.text)],
            )])),
            ..WorkspaceEdit::default()
        }),
        ..CodeAction::default()
    }))
}

/// `# torchlint: ignore-file[TL102]` near the top: the code added to such a comment in the
/// file's first lines, else a new line after a shebang and a coding declaration.
fn file_suppression_edit(document: &Document, code: &str, encoding: Encoding) -> TextEdit {
    const DIRECTIVE: &str = "# torchlint: ignore-file[";
    let at = |offset: usize| document.position(offset, encoding);
    let mut insert_at = 0;
    for (row, line) in document.text.split_inclusive('\n').take(10).enumerate() {
        let start = document.line(row).start;
        if let Some(found) = line.find(DIRECTIVE)
            && let Some(close) = line[found..].find(']')
        {
            let end = start + found + close;
            let listed = line[found + DIRECTIVE.len()..found + close].trim();
            let insert = if listed.is_empty() {
                code.to_owned()
            } else {
                format!(", {code}")
            };
            return TextEdit::new(Range::new(at(end), at(end)), insert);
        }
        let header = (row == 0 && line.starts_with("#!"))
            || (row < 2 && line.starts_with('#') && line.contains("coding"));
        if header && insert_at == start {
            insert_at = start + line.len();
        }
    }
    TextEdit::new(
        Range::new(at(insert_at), at(insert_at)),
        format!("{DIRECTIVE}{code}]\n"),
    )
}

fn action(
    title: String,
    uri: &Uri,
    edits: Vec<TextEdit>,
    diagnostic: &lsp_types::Diagnostic,
    preferred: bool,
) -> CodeActionOrCommand {
    CodeActionOrCommand::CodeAction(CodeAction {
        title,
        kind: Some(CodeActionKind::QUICKFIX),
        diagnostics: Some(vec![diagnostic.clone()]),
        edit: Some(WorkspaceEdit {
            changes: Some(HashMap::from([(uri.clone(), edits)])),
            ..WorkspaceEdit::default()
        }),
        is_preferred: preferred.then_some(true),
        ..CodeAction::default()
    })
}

/// `# noqa: TL102` at the end of the finding's first line; added to an existing `# noqa: ...`
/// list, and after any other comment (`x  # note  # noqa: TL102`).
fn suppression_edit(document: &Document, diagnostic: &Diagnostic, encoding: Encoding) -> TextEdit {
    let row = document.position(diagnostic.range.start, encoding).line as usize;
    let line = document.line(row);
    let text = &document.text[line.clone()];
    let code = &diagnostic.rule.code;
    let at = |offset: usize| document.position(line.start + offset, encoding);
    if let Some(comment) = comment_start(text) {
        let comment_text = &text[comment..];
        if let Some(noqa) = comment_text.find("# noqa:") {
            // Extend the list: `# noqa: TL101` -> `# noqa: TL101, TL102`.
            let list_start = comment + noqa + "# noqa:".len();
            let list_end = text[list_start..]
                .find('#')
                .map_or(text.len(), |i| list_start + i);
            let list = text[list_start..list_end].trim_end();
            let end = list_start + text[list_start..list_end].trim_end().len();
            let insert = if list.trim().is_empty() {
                format!(" {code}")
            } else {
                format!(", {code}")
            };
            return TextEdit::new(Range::new(at(end), at(end)), insert);
        }
    }
    let end = text.trim_end().len();
    TextEdit::new(Range::new(at(end), at(end)), format!("  # noqa: {code}"))
}

/// Where a line's comment starts, outside string literals (a `#` inside quotes is text).
fn comment_start(line: &str) -> Option<usize> {
    let mut quote: Option<char> = None;
    let mut escaped = false;
    for (index, character) in line.char_indices() {
        match quote {
            Some(q) => {
                if escaped {
                    escaped = false;
                } else if character == '\\' {
                    escaped = true;
                } else if character == q {
                    quote = None;
                }
            }
            None => match character {
                '"' | '\'' => quote = Some(character),
                '#' => return Some(index),
                _ => {}
            },
        }
    }
    None
}

/// The documentation of the rules flagged at `position`.
pub fn hover(
    found: &[Diagnostic],
    document: &Document,
    position: Position,
    encoding: Encoding,
) -> Option<Hover> {
    let offset = document.offset(position, encoding);
    let here: Vec<&Diagnostic> = found
        .iter()
        .filter(|d| d.range.start <= offset && offset <= d.range.end)
        .collect();
    let first = here.first()?;
    let mut text = String::new();
    for diagnostic in &here {
        if !text.is_empty() {
            text.push_str("\n\n---\n\n");
        }
        text.push_str(&hover_text(diagnostic));
    }
    Some(Hover {
        contents: HoverContents::Markup(MarkupContent {
            kind: MarkupKind::Markdown,
            value: text,
        }),
        range: Some(document.range(&first.range, encoding)),
    })
}

/// One finding as a hover shows it: the rule and what it flags, what this finding found, the
/// fix, and where the whole page is (a hover is a glance; the page is `torchlint rule`'s).
fn hover_text(diagnostic: &Diagnostic) -> String {
    let rule = &diagnostic.rule;
    let mut text = format!(
        "**{} `{}`** ({})\n\n{}\n\n{}",
        rule.code,
        rule.name,
        rule.severity.as_str(),
        rule.summary(),
        diagnostic.message
    );
    // The help says how to fix it and why; the fix, what the quick fix would write.
    match (&diagnostic.help, &diagnostic.fix) {
        (Some(help), Some(fix)) => text.push_str(&format!(
            "\n\n**Fix:** {help}\n\n**Quick fix:** {}",
            fix.message
        )),
        (Some(help), None) => text.push_str(&format!("\n\n**Fix:** {help}")),
        (None, Some(fix)) => text.push_str(&format!("\n\n**Fix:** {}", fix.message)),
        (None, None) => {}
    }
    let page = match rule.url() {
        Some(url) => format!("[the rule's documentation]({url}), or "),
        None => String::new(),
    };
    text.push_str(&format!("\n\nMore: {page}`torchlint rule {}`", rule.code));
    text
}

fn touches(found: &std::ops::Range<usize>, wanted: &std::ops::Range<usize>) -> bool {
    found.start <= wanted.end && wanted.start <= found.end
}

#[cfg(test)]
mod tests {
    use super::comment_start;

    #[test]
    fn comments_are_found_outside_strings() {
        assert_eq!(comment_start("x = 1  # note"), Some(7));
        assert_eq!(comment_start("x = '#no'  # yes"), Some(11));
        assert_eq!(comment_start(r##"x = "a\"#"  # c"##), Some(12));
        assert_eq!(comment_start("x = 1"), None);
    }
}
