//! The import statements of a file, read off its text before it is parsed: which other files
//! of the run it needs facts from (so that they are linted first), and which of their names it
//! uses (so that only those are summarised).
//!
//! A scan, not a parse: a line that starts (after indentation) with `import` or `from` and
//! reads as an import statement counts, continued over parentheses or backslashes. An import
//! spelt inside a string or under `if TYPE_CHECKING:` counts too; that only orders files
//! (and summarises a name) needlessly, never loses a fact. An indented import (in a function,
//! under `if TYPE_CHECKING:`) is marked deferred: that is where Python code breaks its import
//! cycles, so the schedule cuts a cycle there first.

/// `from module import names` or `import module`.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct Import {
    /// As written: `pkg.models`, `.utils`, `..`, `.`.
    pub module: Box<str>,
    /// The names imported from it; `None` for the whole module (`import pkg.models`,
    /// `from pkg import *`).
    pub names: Option<Box<[Box<str>]>>,
    /// `from pkg import *`: every public name, to use or to re-export.
    pub star: bool,
    /// Spelt indented: run when a function is called, or only by a type checker, or guarded.
    pub deferred: bool,
}

/// The imports of a file's text.
pub fn scan(text: &str) -> Vec<Import> {
    let mut imports = Vec::new();
    let bytes = text.as_bytes();
    // Every statement spells `import` on its first line (`from m import (`), and the word is
    // rare elsewhere: a vectorised search for it, then a look at its line, instead of a look
    // at every line.
    let mut done = 0;
    for at in memchr::memmem::find_iter(bytes, b"import") {
        if at < done {
            continue;
        }
        let mut start = memchr::memrchr(b'\n', &bytes[..at]).map_or(0, |newline| newline + 1);
        // `from m \` / `import x`: the statement starts on the line the backslash continues.
        while start > 0
            && text[..start - 1]
                .trim_end_matches([' ', '\t', '\r'])
                .ends_with('\\')
        {
            start = memchr::memrchr(b'\n', &bytes[..start - 1]).map_or(0, |newline| newline + 1);
        }
        let line = &text[start..];
        let trimmed = line.trim_start_matches([' ', '\t']);
        if trimmed.starts_with("import") || trimmed.starts_with("from") {
            // The statement, with the lines it continues onto.
            let indent = line.len() - trimmed.len();
            let (statement, end) = logical_line(text, start + indent);
            parse_statement(&statement, indent > 0, &mut imports);
            done = end;
        }
    }
    // Kept to the end of the run, for every file: without the room the pushes left.
    imports.shrink_to_fit();
    imports
}

/// The text of the logical line starting at `at`: continued while a parenthesis is open or a
/// line ends with a backslash. Returns it (with line breaks as spaces) and where it ends.
fn logical_line(text: &str, at: usize) -> (String, usize) {
    let mut statement = String::new();
    let mut depth = 0i32;
    let mut position = at;
    let bytes = text.as_bytes();
    loop {
        let end = memchr::memchr(b'\n', &bytes[position..]).map_or(bytes.len(), |i| position + i);
        let line = &text[position..end];
        let code = line.split('#').next().unwrap_or("");
        for c in code.bytes() {
            match c {
                b'(' => depth += 1,
                b')' => depth -= 1,
                _ => {}
            }
        }
        let continued = code.trim_end().ends_with('\\');
        statement.push_str(code.trim_end().trim_end_matches('\\'));
        statement.push(' ');
        position = end + 1;
        if (depth <= 0 && !continued) || position >= bytes.len() || statement.len() > 10_000 {
            return (statement, position);
        }
    }
}

fn is_name(word: &str) -> bool {
    !word.is_empty()
        && !word.starts_with(|c: char| c.is_ascii_digit())
        && word.chars().all(|c| c.is_alphanumeric() || c == '_')
}

fn is_dotted(word: &str) -> bool {
    word.split('.').all(is_name)
}

/// One logical line: `import a.b as c, d` or `from .m import (x, y as z)`; anything else
/// (prose in a docstring, `important = 1`) adds nothing.
fn parse_statement(statement: &str, deferred: bool, imports: &mut Vec<Import>) {
    // `a;b` on one line: each part on its own.
    for part in statement.split(';') {
        let mut words = part.split_whitespace();
        match words.next() {
            Some("import") => {
                let rest: String = words.collect::<Vec<_>>().join(" ");
                for item in rest.split(',') {
                    let module = item.split_whitespace().next().unwrap_or("");
                    if is_dotted(module) {
                        imports.push(Import {
                            module: module.into(),
                            names: None,
                            star: false,
                            deferred,
                        });
                    }
                }
            }
            Some("from") => {
                let Some(module) = words.next() else { continue };
                let dots = module.len() - module.trim_start_matches('.').len();
                let rest = &module[dots..];
                if !(rest.is_empty() && dots > 0 || is_dotted(rest)) {
                    continue;
                }
                if words.next() != Some("import") {
                    continue;
                }
                let names: String = words.collect::<Vec<_>>().join(" ");
                let names = names.trim().trim_start_matches('(').trim_end_matches(')');
                if names.trim() == "*" {
                    imports.push(Import {
                        module: module.into(),
                        names: None,
                        star: true,
                        deferred,
                    });
                    continue;
                }
                // Boxed, so without the room a collected vector leaves.
                let names: Box<[Box<str>]> = names
                    .split(',')
                    .filter_map(|item| item.split_whitespace().next())
                    .filter(|name| is_name(name))
                    .map(Box::from)
                    .collect();
                if !names.is_empty() {
                    imports.push(Import {
                        module: module.into(),
                        names: Some(names),
                        star: false,
                        deferred,
                    });
                }
            }
            _ => {}
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn import(module: &str, names: Option<&[&str]>) -> Import {
        Import {
            module: module.into(),
            names: names.map(|names| names.iter().map(|n| Box::from(*n)).collect()),
            star: false,
            deferred: false,
        }
    }

    fn deferred(import: Import) -> Import {
        Import {
            deferred: true,
            ..import
        }
    }

    #[test]
    fn reads_every_form_of_import() {
        let text = "import torch\nimport a.b as c, d\nfrom .models import Net, build as b  # x\n\
                    def f():\n    from ..utils import (\n        helper,\n        other,\n    )\n\
                    from . import losses\nfrom pkg import *\nfrom x import \\\n    y\n";
        assert_eq!(
            scan(text),
            [
                import("torch", None),
                import("a.b", None),
                import("d", None),
                import(".models", Some(&["Net", "build"])),
                deferred(import("..utils", Some(&["helper", "other"]))),
                import(".", Some(&["losses"])),
                Import {
                    star: true,
                    ..import("pkg", None)
                },
                import("x", Some(&["y"])),
            ]
        );
    }

    #[test]
    fn a_statement_whose_import_is_on_a_continued_line() {
        let text = "x = 1\nfrom pkg.models \\\n    import Net\n";
        assert_eq!(scan(text), [import("pkg.models", Some(&["Net"]))]);
    }

    #[test]
    fn prose_and_lookalikes_are_not_imports() {
        let text = "important = 1\nfrom_x = 2\n\"\"\"\nfrom the model import weights we learn\nimport this, that and more\n\"\"\"\n";
        // Docstring prose that happens to read as an import is kept (harmless); the rest not.
        let found = scan(text);
        assert!(found.iter().all(|i| &*i.module != "the model"));
        assert!(
            !found
                .iter()
                .any(|i| &*i.module == "important" || i.module.starts_with("from_"))
        );
    }
}
