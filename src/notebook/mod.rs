//! Jupyter notebooks (`.ipynb`, nbformat 4): the code cells become one Python text, with a
//! cell map so that findings point at `notebook.ipynb:cell 4:line 2`.
//!
//! IPython syntax that is not Python (magics, shell escapes, help) is replaced line for line
//! by something that parses, so every line of the text stays the line of its cell.

use std::path::Path;
use std::sync::LazyLock;

use regex::Regex;
use serde::Deserialize;
use serde::de::{self, Deserializer, SeqAccess, Visitor};

use crate::source::{Cell, SourceFile};

mod fixes;

pub use fixes::CellSources;

/// A notebook as the linter reads it.
#[derive(Debug, PartialEq, Eq)]
pub enum Notebook {
    /// The code cells, concatenated (each followed by a line break), and where each starts.
    Python { text: String, cells: Vec<Cell> },
    /// A notebook of another kernel language (R, Julia, ...): nothing torchlint can read.
    OtherLanguage(String),
}

/// The parts of nbformat 4 that matter here; everything else (outputs, execution counts,
/// attachments) is ignored. `cells` is optional so that an nbformat 3 notebook, which has
/// `worksheets` instead, gets its own message.
#[derive(Deserialize)]
#[serde(expecting = "a notebook (a JSON object with `cells` and `metadata`)")]
struct RawNotebook {
    cells: Option<Vec<RawCell>>,
    #[serde(default)]
    nbformat: Option<u64>,
    /// Kept loose: a metadata shape torchlint does not expect is no reason to skip the code.
    #[serde(default)]
    metadata: serde_json::Value,
}

#[derive(Deserialize)]
#[serde(expecting = "a cell (a JSON object with `cell_type` and `source`)")]
struct RawCell {
    cell_type: String,
    #[serde(default)]
    source: CellSource,
}

/// nbformat lets a cell's source be one string or a list of strings (lines with their `\n`).
#[derive(Default)]
struct CellSource(String);

impl<'de> Deserialize<'de> for CellSource {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        deserializer.deserialize_any(CellSourceVisitor)
    }
}

struct CellSourceVisitor;

impl<'de> Visitor<'de> for CellSourceVisitor {
    type Value = CellSource;

    fn expecting(&self, formatter: &mut std::fmt::Formatter) -> std::fmt::Result {
        formatter.write_str("a cell source (a string or a list of strings)")
    }

    fn visit_str<E: de::Error>(self, text: &str) -> Result<CellSource, E> {
        Ok(CellSource(text.to_owned()))
    }

    fn visit_seq<A: SeqAccess<'de>>(self, mut parts: A) -> Result<CellSource, A::Error> {
        let mut text = String::new();
        while let Some(part) = parts.next_element::<String>()? {
            text.push_str(&part);
        }
        Ok(CellSource(text))
    }
}

/// Reads a notebook's bytes. The error says what is wrong with the file, and what to do.
pub fn read(bytes: &[u8]) -> Result<Notebook, String> {
    let bytes = bytes.strip_prefix(b"\xEF\xBB\xBF").unwrap_or(bytes);
    // serde would read a JSON list as the notebook's fields in order: say what it is instead.
    if bytes.iter().find(|byte| !byte.is_ascii_whitespace()) == Some(&b'[') {
        return Err("not a valid notebook: it is a JSON list, and a notebook is a JSON object with `cells` and `metadata`; fix the file, or exclude it (`extend-exclude`)".to_owned());
    }
    let bytes = replace_lone_surrogates(bytes);
    let invalid = |error: serde_json::Error| {
        format!(
            "not a valid notebook: {error}; fix the JSON (Jupyter cannot open it either), or exclude the file (`extend-exclude`)"
        )
    };
    // Through a JSON value first: a key written twice keeps its last value, as Python's `json`
    // (and so Jupyter) reads it, where a struct would refuse the duplicate.
    let value: serde_json::Value = serde_json::from_slice(&bytes).map_err(invalid)?;
    let raw: RawNotebook = serde_json::from_value(value).map_err(invalid)?;
    let Some(cells) = raw.cells else {
        return Err(match raw.nbformat {
            Some(version) if version < 4 => format!(
                "nbformat {version} notebooks are not supported; convert it with `jupyter nbconvert --to notebook --nbformat 4`"
            ),
            _ => "not a valid notebook: it has no `cells` list; fix the file, or exclude it (`extend-exclude`)".to_owned(),
        });
    };
    if let Some(language) = kernel_language(&raw.metadata)
        && !is_python(language)
    {
        return Ok(Notebook::OtherLanguage(language.to_owned()));
    }
    Ok(concatenate(&cells))
}

/// A `\uD800`-`\uDFFF` escape that is not half of a surrogate pair becomes `\uFFFD`, the
/// replacement character, as Python's `json` would keep it but a Rust string cannot. The text
/// keeps its length, so positions in errors stay right.
fn replace_lone_surrogates(bytes: &[u8]) -> std::borrow::Cow<'_, [u8]> {
    fn escape_at(bytes: &[u8], at: usize) -> Option<u16> {
        let escape = bytes.get(at..at + 6)?;
        if escape[0] != b'\\' || escape[1] != b'u' {
            return None;
        }
        u16::from_str_radix(std::str::from_utf8(&escape[2..]).ok()?, 16).ok()
    }
    let is_high = |unit: u16| (0xD800..0xDC00).contains(&unit);
    let is_low = |unit: u16| (0xDC00..0xE000).contains(&unit);
    if memchr::memmem::find(bytes, b"\\u").is_none() {
        return std::borrow::Cow::Borrowed(bytes);
    }
    let mut out = bytes.to_vec();
    let mut at = 0;
    while at < bytes.len() {
        if bytes[at] != b'\\' {
            at += 1;
            continue;
        }
        match escape_at(bytes, at) {
            Some(unit) if is_high(unit) && escape_at(bytes, at + 6).is_some_and(is_low) => at += 12,
            Some(unit) if is_high(unit) || is_low(unit) => {
                out[at..at + 6].copy_from_slice(b"\\ufffd");
                at += 6;
            }
            Some(_) => at += 6,
            // Any other escape is two bytes: `\\` must not start a `\u` of its own.
            None => at += 2,
        }
    }
    std::borrow::Cow::Owned(out)
}

/// Reads a notebook into the source the linter lints: `Ok(None)` when there is nothing to
/// lint (another kernel language, or no code cells).
pub fn source_file(name: &Path, bytes: &[u8]) -> Result<Option<SourceFile>, String> {
    match read(bytes)? {
        Notebook::Python { cells, .. } if cells.is_empty() => Ok(None),
        Notebook::Python { text, cells } => Ok(Some(SourceFile::notebook(name, text, &cells))),
        Notebook::OtherLanguage(_) => Ok(None),
    }
}

/// The Python text of a notebook, for readers that need no cell map (the project pass).
pub fn python_text(bytes: &[u8]) -> Option<String> {
    match read(bytes).ok()? {
        Notebook::Python { text, .. } => Some(text),
        Notebook::OtherLanguage(_) => None,
    }
}

/// `metadata.kernelspec.language`, else `metadata.language_info.name`.
fn kernel_language(metadata: &serde_json::Value) -> Option<&str> {
    let named = |pointer: &str| {
        metadata
            .pointer(pointer)
            .and_then(serde_json::Value::as_str)
            .map(str::trim)
            .filter(|language| !language.is_empty())
    };
    named("/kernelspec/language").or_else(|| named("/language_info/name"))
}

fn is_python(language: &str) -> bool {
    language
        .get(..6)
        .is_some_and(|prefix| prefix.eq_ignore_ascii_case("python"))
}

/// Joins the code cells, each ending with a line break; cells are numbered as Jupyter shows
/// them, markdown and raw cells included. Empty cells hold no line, so they are left out.
fn concatenate(cells: &[RawCell]) -> Notebook {
    let mut text = String::new();
    let mut starts = Vec::new();
    for (index, cell) in cells.iter().enumerate() {
        if cell.cell_type != "code" || cell.source.0.is_empty() {
            continue;
        }
        starts.push(Cell {
            number: index + 1,
            offset: text.len(),
        });
        text.push_str(&python_code(&cell.source.0));
        if !text.ends_with('\n') {
            text.push('\n');
        }
    }
    Notebook::Python {
        text,
        cells: starts,
    }
}

/// Cell magics whose body is Python that runs in the kernel: only their first line is blanked.
/// The body of any other (`%%bash`, `%%writefile`, `%%html`) is not Python.
const PYTHON_CELL_MAGICS: &[&str] = &["time", "timeit", "capture", "prun", "debug"];

/// A cell's source with IPython syntax replaced, line for line, by Python that parses: a line
/// magic, shell escape or help line becomes `pass` at the same indentation, `x = !ls` becomes
/// `x = None`, the lines a magic continues onto with a backslash become blank, and so does a
/// cell whose `%%` magic runs something other than Python.
fn python_code(cell: &str) -> String {
    let lines = split_lines(cell);
    let mut out = String::with_capacity(cell.len());
    let first = lines
        .iter()
        .position(|line| !line.content.trim().is_empty());
    let mut magic_line = None;
    if let Some(first) = first
        && let Some(name) = cell_magic_name(lines[first].content)
    {
        if !PYTHON_CELL_MAGICS.contains(&name) {
            for line in &lines {
                out.push_str(line.line_break());
            }
            return out;
        }
        magic_line = Some(first);
    }

    let mut scanner = Scanner::default();
    // The previous line was IPython syntax ending in a backslash: this one continues it.
    let mut continues_magic = false;
    for (index, line) in lines.iter().enumerate() {
        let replacement = if continues_magic || magic_line == Some(index) {
            Some(String::new())
        } else if scanner.at_statement_start() {
            ipython_replacement(line.content, &scanner)
        } else {
            None
        };
        match replacement {
            Some(replacement) => {
                continues_magic = line.content.ends_with('\\');
                out.push_str(&replacement);
            }
            None => {
                scanner.scan(line.content);
                out.push_str(line.content);
            }
        }
        out.push_str(line.line_break());
    }
    out
}

/// `%%time -n 3` → `time`.
fn cell_magic_name(line: &str) -> Option<&str> {
    let rest = line.strip_prefix("%%")?;
    rest.split_whitespace().next()
}

/// `x = !ls`, `files, = %sx ls`, `self.out = !cmd`: an assignment from a magic or a shell escape.
static MAGIC_ASSIGNMENT: LazyLock<Regex> = LazyLock::new(|| {
    Regex::new(r"^(\s*[\w.]+(?:\s*,\s*[\w.]+)*\s*,?\s*=\s*)[!%]").expect("a valid regex")
});

/// What replaces a line that starts a statement, when it is IPython syntax rather than Python:
/// the escapes `%`, `!`, `?` and the autocall ones (`/`, `,`, `;`), which no Python statement
/// starts with, help on a name (`obj?`), and assignments from magics.
fn ipython_replacement(line: &str, scanner: &Scanner) -> Option<String> {
    let code = line.trim_start();
    let indent = &line[..line.len() - code.len()];
    if code.starts_with(['%', '!', '?', '/', ',', ';']) {
        return Some(format!("{indent}pass"));
    }
    if let Some(captures) = MAGIC_ASSIGNMENT.captures(line)
        && let Some(target) = captures.get(1)
    {
        return Some(format!("{}None", target.as_str()));
    }
    // `obj?` / `obj??`: a `?` ending the code, outside strings and comments (Python has no `?`).
    let mut probe = scanner.clone();
    if probe.scan(line) == Some(b'?') {
        return Some(format!("{indent}pass"));
    }
    None
}

/// One line of a cell: its text and its line break (`\n`, `\r\n`, a lone `\r`, or none on the
/// last line), split the way [`SourceFile`] counts lines.
struct Line<'a> {
    content: &'a str,
    terminator: &'a str,
}

impl Line<'_> {
    /// The line break to write: a lone `\r` becomes `\n`, since with the line after it
    /// blanked it would pair with that line's `\n` into one `\r\n` and lose a line.
    fn line_break(&self) -> &str {
        if self.terminator == "\r" {
            "\n"
        } else {
            self.terminator
        }
    }
}

fn split_lines(text: &str) -> Vec<Line<'_>> {
    let bytes = text.as_bytes();
    let mut lines = Vec::new();
    let mut start = 0;
    let mut i = 0;
    while i < bytes.len() {
        let terminator_len = match bytes[i] {
            b'\r' if bytes.get(i + 1) == Some(&b'\n') => 2,
            b'\r' | b'\n' => 1,
            _ => {
                i += 1;
                continue;
            }
        };
        lines.push(Line {
            content: &text[start..i],
            terminator: &text[i..i + terminator_len],
        });
        i += terminator_len;
        start = i;
    }
    if start < text.len() {
        lines.push(Line {
            content: &text[start..],
            terminator: "",
        });
    }
    lines
}

/// Just enough of Python's tokenizer to know whether a line starts a statement: the strings
/// and brackets still open, and a backslash continuation, carried from line to line.
#[derive(Debug, Clone, Default)]
struct Scanner {
    string: Option<OpenString>,
    depth: usize,
    backslash: bool,
}

#[derive(Debug, Clone, Copy)]
struct OpenString {
    quote: u8,
    triple: bool,
}

impl Scanner {
    fn at_statement_start(&self) -> bool {
        self.string.is_none() && self.depth == 0 && !self.backslash
    }

    /// Reads one line (without its line break); returns its last byte of code outside strings
    /// and comments, if any.
    fn scan(&mut self, line: &str) -> Option<u8> {
        let bytes = line.as_bytes();
        let mut last = None;
        let mut escaped_line_break = false;
        self.backslash = false;
        let mut i = 0;
        while i < bytes.len() {
            let byte = bytes[i];
            if let Some(open) = self.string {
                if byte == b'\\' {
                    // An escaped character never ends the string (in raw strings too).
                    escaped_line_break = i + 1 == bytes.len();
                    i += 2;
                    continue;
                }
                if byte == open.quote {
                    let closes = !open.triple || bytes[i..].starts_with(&[byte; 3]);
                    if closes {
                        self.string = None;
                        last = Some(byte);
                        i += if open.triple { 3 } else { 1 };
                        continue;
                    }
                }
                i += 1;
                continue;
            }
            match byte {
                b'#' => break,
                b'\'' | b'"' => {
                    let triple = bytes[i..].starts_with(&[byte; 3]);
                    self.string = Some(OpenString {
                        quote: byte,
                        triple,
                    });
                    last = Some(byte);
                    i += if triple { 3 } else { 1 };
                    continue;
                }
                b'(' | b'[' | b'{' => self.depth += 1,
                b')' | b']' | b'}' => self.depth = self.depth.saturating_sub(1),
                b'\\' if i + 1 == bytes.len() => self.backslash = true,
                _ => {}
            }
            if !byte.is_ascii_whitespace() {
                last = Some(byte);
            }
            i += 1;
        }
        // A one-quote string ends with its line unless a backslash continues it (an
        // unterminated one is a syntax error the parser reports).
        if let Some(open) = self.string
            && !open.triple
            && !escaped_line_break
        {
            self.string = None;
        }
        last
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn lines_of(text: &str) -> usize {
        SourceFile::new("x.py", text.to_owned()).line_starts().len()
    }

    #[test]
    fn line_magics_and_shell_escapes_become_pass() {
        let cell = "%matplotlib inline\n!pip install torch\nimport torch\n%pip install -q x\n";
        assert_eq!(
            python_code(cell),
            "pass\npass\nimport torch\npass\n",
            "one line each, same count"
        );
    }

    #[test]
    fn indentation_is_kept() {
        let cell = "for step in range(3):\n    %time train(step)\n    !nvidia-smi\n";
        assert_eq!(
            python_code(cell),
            "for step in range(3):\n    pass\n    pass\n"
        );
    }

    #[test]
    fn help_lines_become_pass() {
        let cell = "?torch.load\ntorch.load?\ntorch.load??\nx = 1  # why?\ns = 'what?'\n";
        assert_eq!(
            python_code(cell),
            "pass\npass\npass\nx = 1  # why?\ns = 'what?'\n"
        );
    }

    #[test]
    fn assignments_from_magics_keep_their_target() {
        let cell = "files = !ls *.pt\nout, = %sx nvidia-smi\nx = 5 % 3\ny != !z\n";
        assert_eq!(
            python_code(cell),
            "files = None\nout, = None\nx = 5 % 3\ny != !z\n"
        );
    }

    #[test]
    fn backslash_continuations_of_a_magic_are_blanked() {
        let cell = "!pip install \\\n    torch \\\n    numpy\nx = 1 + \\\n    2\n";
        assert_eq!(python_code(cell), "pass\n\n\nx = 1 + \\\n    2\n");
    }

    #[test]
    fn strings_and_brackets_are_not_touched() {
        let cell = "doc = \"\"\"\n%not a magic\n!nor this\n\"\"\"\nvalue = (\n    10\n    % 3\n)\n";
        assert_eq!(python_code(cell), cell);
        let single = "s = 'a \\\n%still a string'\n%magic\n";
        assert_eq!(python_code(single), "s = 'a \\\n%still a string'\npass\n");
        let after_backslash = "x = 1 \\\n    % 2\n";
        assert_eq!(python_code(after_backslash), after_backslash);
    }

    #[test]
    fn a_quote_in_a_shell_escape_does_not_open_a_string() {
        let cell = "!echo \"it's\"\n%env NAME='x\n%magic\n";
        assert_eq!(python_code(cell), "pass\npass\npass\n");
    }

    #[test]
    fn python_cell_magics_keep_their_body() {
        let cell = "%%time\nfor x in loader:\n    %time step(x)\n";
        assert_eq!(python_code(cell), "\nfor x in loader:\n    pass\n");
        assert_eq!(python_code("\n%%timeit -n 3\nf()"), "\n\nf()");
    }

    #[test]
    fn other_cell_magics_blank_the_cell() {
        let cell = "%%bash\nfor f in *.pt; do\n  echo \"$f\"\ndone\n";
        assert_eq!(python_code(cell), "\n\n\n\n");
        let unterminated = "%%writefile train.py\r\nimport torch\rx = (";
        assert_eq!(python_code(unterminated), "\r\n\n");
    }

    #[test]
    fn line_count_never_changes() {
        for cell in [
            "%%bash\necho 'hi\\\n",
            "%magic\r\n!a \\\r\nb\rc\n",
            "%%bash\rx\n",
            "%a \\\rb\n",
            "x = '''\n%a\n''' ; %b\n?",
            "a = (\n%b\n",
            "",
            "\\",
        ] {
            assert_eq!(lines_of(&python_code(cell)), lines_of(cell), "{cell:?}");
        }
    }

    #[test]
    fn line_count_never_changes_on_scrambled_cells() {
        // A fixed pseudo-random walk over the characters the transformation cares about.
        let alphabet: Vec<char> = "%!?/,;=#'\"\\()[]{} \t\n\r\nxé.".chars().collect();
        let mut state: u64 = 0x9E37_79B9_7F4A_7C15;
        for _ in 0..2000 {
            let mut cell = String::new();
            for _ in 0..(state % 40) {
                state = state
                    .wrapping_mul(6_364_136_223_846_793_005)
                    .wrapping_add(1_442_695_040_888_963_407);
                cell.push(alphabet[(state >> 33) as usize % alphabet.len()]);
            }
            assert_eq!(lines_of(&python_code(&cell)), lines_of(&cell), "{cell:?}");
        }
    }

    #[test]
    fn concatenates_code_cells_with_their_numbers() {
        let json = br##"{"cells": [
            {"cell_type": "markdown", "metadata": {}, "source": ["# Title\n"]},
            {"cell_type": "code", "metadata": {}, "outputs": [], "execution_count": 1,
             "source": ["%matplotlib inline\n", "import torch"]},
            {"cell_type": "code", "metadata": {}, "outputs": [], "source": ""},
            {"cell_type": "raw", "metadata": {}, "source": "raw"},
            {"cell_type": "code", "metadata": {}, "outputs": [], "source": "x = 1\n"}
          ], "metadata": {"kernelspec": {"language": "python", "name": "python3"}},
          "nbformat": 4, "nbformat_minor": 5}"##;
        let expected = Notebook::Python {
            text: "pass\nimport torch\nx = 1\n".to_owned(),
            cells: vec![
                Cell {
                    number: 2,
                    offset: 0,
                },
                Cell {
                    number: 5,
                    offset: 18,
                },
            ],
        };
        assert_eq!(read(json), Ok(expected));
    }

    #[test]
    fn other_kernel_languages_are_recognised() {
        let r = br#"{"cells": [], "metadata": {"kernelspec": {"language": "R"}}, "nbformat": 4}"#;
        assert_eq!(read(r), Ok(Notebook::OtherLanguage("R".to_owned())));
        let julia = br#"{"cells": [], "metadata": {"language_info": {"name": "julia"}}}"#;
        assert_eq!(read(julia), Ok(Notebook::OtherLanguage("julia".to_owned())));
        let python = br#"{"cells": [], "metadata": {"language_info": {"name": "Python3"}}}"#;
        assert!(matches!(read(python), Ok(Notebook::Python { .. })));
        let odd = br#"{"cells": [], "metadata": {"kernelspec": 3}}"#;
        assert!(matches!(read(odd), Ok(Notebook::Python { .. })));
    }

    #[test]
    fn malformed_notebooks_are_explained() {
        let error =
            read(b"{\"cells\": [\n  {\"cell_type\": \"code\",\n    \"source\" 1}]}").unwrap_err();
        assert!(
            error.starts_with("not a valid notebook: expected `:` at line 3 column 14;"),
            "{error}"
        );
        let error = read(br#"{"cells": [{"cell_type": "code", "source": 3}]}"#).unwrap_err();
        assert!(
            error.contains("expected a cell source (a string or a list of strings)"),
            "{error}"
        );
        let error = read(b" [1, 2]").unwrap_err();
        assert!(error.contains("it is a JSON list"), "{error}");
        let error = read(b"3").unwrap_err();
        assert!(error.contains("expected a notebook"), "{error}");
        let error = read(br#"{"worksheets": [], "nbformat": 3}"#).unwrap_err();
        assert!(
            error.starts_with("nbformat 3 notebooks are not supported"),
            "{error}"
        );
        assert!(read(b"").is_err());
        assert!(read(b"\xff\xfe").is_err());
    }
}
