//! The engine's layers point one way (see ARCHITECTURE.md). This test reads `src/`, lists the
//! `crate::` paths each top-level module names (`use crate::a::B;`, `use crate::{a, b::c};`, and
//! inline `crate::a::b(...)`), and fails on an edge that points up the order below, printing the
//! edge and the names it uses. It reads the sources as text, as rust-analyzer's tidy tests do:
//! comments and string literals are blanked first, so neither counts as a use.

use std::collections::{BTreeMap, BTreeSet};
use std::fs;
use std::path::{Path, PathBuf};

/// The layers, top to bottom, a line per layer. A module may name its own layer and the layers
/// below it, never one above. The checker and the rules share a line: the checker dispatches
/// by node kind, a rule reads the checker's context; that pair is the only circle.
const LAYERS: &str = "
    cli
    server probe
    project cache discovery baseline render
    linter suppression fix
    checker rules
    diagnostic fingerprint
    semantic
    settings
    rule_meta
    parse syntax node_children notebook
    source
    files error escape
";

/// Edges that still point up, each to be removed: the test fails on an upward edge not listed
/// here, and on a listed edge that no longer exists, so the list only shrinks. Empty: keep it so.
const KNOWN_BACK_EDGES: &[(&str, &str)] = &[];

/// A path a module names, and the file it names it in.
type Uses = BTreeMap<(String, String), BTreeSet<String>>;

#[test]
fn layers_point_one_way() {
    let layers = layers();
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("src");
    let modules = top_level_modules(&root);
    let undeclared: Vec<&String> = modules
        .iter()
        .filter(|module| !layers.contains_key(module.as_str()))
        .collect();
    assert!(
        undeclared.is_empty(),
        "top-level modules missing from LAYERS in tests/architecture.rs (give each a layer): {undeclared:?}"
    );

    let uses = crate_uses(&root, &modules);
    let mut errors = Vec::new();
    let mut seen_back = BTreeSet::new();
    for ((from, to), names) in &uses {
        let (Some(&above), Some(&below)) = (layers.get(from.as_str()), layers.get(to.as_str()))
        else {
            continue;
        };
        if below >= above {
            continue;
        }
        if KNOWN_BACK_EDGES.contains(&(from.as_str(), to.as_str())) {
            seen_back.insert((from.clone(), to.clone()));
            continue;
        }
        let names: Vec<&str> = names.iter().map(String::as_str).collect();
        errors.push(format!(
            "`{from}` (layer {above}) names `{to}` (layer {below}), a layer above it: {}",
            names.join(", ")
        ));
    }
    for (from, to) in KNOWN_BACK_EDGES {
        if !seen_back.contains(&(from.to_string(), to.to_string())) {
            errors.push(format!(
                "the known back edge `{from}` -> `{to}` is gone: remove it from KNOWN_BACK_EDGES"
            ));
        }
    }
    assert!(
        errors.is_empty(),
        "layering violations (see ARCHITECTURE.md; the order is LAYERS in tests/architecture.rs):\n  {}\n",
        errors.join("\n  ")
    );
}

/// Module name → layer index (0 is the top).
fn layers() -> BTreeMap<&'static str, usize> {
    let mut layers = BTreeMap::new();
    let lines = LAYERS
        .lines()
        .map(str::trim)
        .filter(|line| !line.is_empty());
    for (index, line) in lines.enumerate() {
        for module in line.split_whitespace() {
            assert!(
                layers.insert(module, index).is_none(),
                "`{module}` is declared twice in LAYERS"
            );
        }
    }
    layers
}

/// The modules `lib.rs` declares (`pub mod x;`).
fn top_level_modules(root: &Path) -> BTreeSet<String> {
    let lib = fs::read_to_string(root.join("lib.rs")).unwrap();
    blank_comments_and_strings(&lib)
        .lines()
        .filter_map(|line| {
            let line = line.trim();
            let rest = line
                .strip_prefix("pub mod ")
                .or(line.strip_prefix("mod "))?;
            Some(rest.trim_end_matches(';').trim().to_owned())
        })
        .collect()
}

/// (from, to) → the paths `from` names in `to`, each with the file that names it.
fn crate_uses(root: &Path, modules: &BTreeSet<String>) -> Uses {
    let mut uses = Uses::new();
    for module in modules {
        let mut files = Vec::new();
        let file = root.join(format!("{module}.rs"));
        if file.is_file() {
            files.push(file);
        }
        let dir = root.join(module);
        if dir.is_dir() {
            rust_files(&dir, &mut files);
        }
        for file in files {
            let text = blank_comments_and_strings(&fs::read_to_string(&file).unwrap());
            let shown = file.strip_prefix(root.parent().unwrap()).unwrap().display();
            for path in crate_paths(&text) {
                let to = path.split("::").next().unwrap_or_default().to_owned();
                if to != *module && modules.contains(&to) {
                    uses.entry((module.clone(), to))
                        .or_default()
                        .insert(format!("{path} ({shown})"));
                }
            }
        }
    }
    uses
}

fn rust_files(dir: &Path, files: &mut Vec<PathBuf>) {
    let mut entries: Vec<PathBuf> = fs::read_dir(dir)
        .unwrap()
        .map(|entry| entry.unwrap().path())
        .collect();
    entries.sort();
    for path in entries {
        if path.is_dir() {
            rust_files(&path, files);
        } else if path.extension().is_some_and(|ext| ext == "rs") {
            files.push(path);
        }
    }
}

/// The paths after each `crate::`, relative to the crate root: `crate::a::b::C` gives
/// `a::b::C`; `crate::{a, b::{c, d as e}}` gives `a`, `b::c`, `b::d`.
fn crate_paths(text: &str) -> Vec<String> {
    let mut paths = Vec::new();
    let mut rest = text;
    while let Some(at) = rest.find("crate::") {
        let before = rest[..at].chars().next_back();
        rest = &rest[at + "crate::".len()..];
        if before.is_some_and(|c| c.is_alphanumeric() || c == '_') {
            continue; // `my_crate::`
        }
        expand("", rest, &mut paths);
    }
    paths
}

/// Expands the path or `{...}` group at the start of `text`, prefixed with `prefix`.
fn expand(prefix: &str, text: &str, paths: &mut Vec<String>) {
    let text = text.trim_start();
    if let Some(group) = text.strip_prefix('{') {
        for item in split_group(group) {
            expand(prefix, item, paths);
        }
        return;
    }
    let mut path = prefix.to_owned();
    let mut rest = text;
    loop {
        let end = rest
            .find(|c: char| !(c.is_alphanumeric() || c == '_'))
            .unwrap_or(rest.len());
        if end == 0 {
            break;
        }
        if !path.is_empty() {
            path.push_str("::");
        }
        path.push_str(&rest[..end]);
        rest = rest[end..].trim_start();
        match rest.strip_prefix("::") {
            Some(after) => {
                rest = after.trim_start();
                if rest.starts_with('{') {
                    expand(&path, rest, paths);
                    return;
                }
            }
            None => break,
        }
    }
    if !path.is_empty() && path != prefix {
        paths.push(path);
    }
}

/// The items of a `{...}` group (the text after its `{`), split at its top-level commas.
fn split_group(text: &str) -> Vec<&str> {
    let mut items = Vec::new();
    let (mut depth, mut start) = (0usize, 0);
    for (at, c) in text.char_indices() {
        match c {
            '{' => depth += 1,
            '}' if depth == 0 => {
                items.push(&text[start..at]);
                break;
            }
            '}' => depth -= 1,
            ',' if depth == 0 => {
                items.push(&text[start..at]);
                start = at + 1;
            }
            _ => {}
        }
    }
    items.retain(|item| !item.trim().is_empty());
    items
}

/// The text with comments, string and character literals replaced by spaces (newlines kept).
fn blank_comments_and_strings(text: &str) -> String {
    let chars: Vec<char> = text.chars().collect();
    let mut out = String::with_capacity(text.len());
    let mut i = 0;
    let blank = |out: &mut String, c: char| out.push(if c == '\n' { '\n' } else { ' ' });
    while i < chars.len() {
        let c = chars[i];
        let next = chars.get(i + 1).copied();
        if c == '/' && next == Some('/') {
            while i < chars.len() && chars[i] != '\n' {
                i += 1;
            }
        } else if c == '/' && next == Some('*') {
            let mut depth = 0;
            while i < chars.len() {
                if chars[i] == '/' && chars.get(i + 1) == Some(&'*') {
                    depth += 1;
                    i += 2;
                } else if chars[i] == '*' && chars.get(i + 1) == Some(&'/') {
                    depth -= 1;
                    i += 2;
                    if depth == 0 {
                        break;
                    }
                } else {
                    blank(&mut out, chars[i]);
                    i += 1;
                }
            }
        } else if c == 'r'
            && (next == Some('"') || next == Some('#'))
            && !chars[..i]
                .last()
                .is_some_and(|p| p.is_alphanumeric() || *p == '_')
        {
            // A raw string `r"..."`, `r#"..."#`.
            let mut j = i + 1;
            let mut hashes = 0;
            while chars.get(j) == Some(&'#') {
                hashes += 1;
                j += 1;
            }
            if chars.get(j) != Some(&'"') {
                out.push(c);
                i += 1;
                continue;
            }
            j += 1;
            while j < chars.len() {
                if chars[j] == '"' && (0..hashes).all(|k| chars.get(j + 1 + k) == Some(&'#')) {
                    j += 1 + hashes;
                    break;
                }
                blank(&mut out, chars[j]);
                j += 1;
            }
            i = j;
        } else if c == '"' {
            i += 1;
            while i < chars.len() && chars[i] != '"' {
                if chars[i] == '\\' {
                    i += 1;
                }
                if let Some(&c) = chars.get(i) {
                    blank(&mut out, c);
                }
                i += 1;
            }
            i += 1;
        } else if c == '\'' && next == Some('\\') {
            // `'\n'`, `'\''`, `'\u{1b}'`.
            i += 2;
            while i < chars.len() && chars[i] != '\'' {
                i += 1;
            }
            i += 1;
        } else if c == '\'' && chars.get(i + 2) == Some(&'\'') {
            i += 3; // `'"'`
        } else {
            out.push(c);
            i += 1;
        }
    }
    out
}

#[test]
fn reads_groups_and_inline_paths() {
    let text = blank_comments_and_strings(
        "use crate::{a, b::{c, d as e}, f::g::H};\n\
         // crate::commented::Out\n\
         let s = \"crate::quoted\"; let c = '\"'; x = crate::inline::call(1);\n\
         use crate::rules::RuleMeta; my_crate::not_ours();",
    );
    assert_eq!(
        crate_paths(&text),
        [
            "a",
            "b::c",
            "b::d",
            "f::g::H",
            "inline::call",
            "rules::RuleMeta"
        ]
    );
}
