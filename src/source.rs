//! Source text: decoding bytes into text and mapping byte offsets to rows and columns (and, in
//! a notebook, to cells).

use std::ops::Range;
use std::path::{Path, PathBuf};

/// A byte range in a source text.
pub type TextRange = Range<usize>;

/// One file's text, with the index that turns byte offsets into 1-based rows and columns.
#[derive(Debug)]
pub struct SourceFile {
    /// The path as it is shown to the user (relative when the user named it so).
    name: PathBuf,
    text: String,
    line_starts: Vec<usize>,
    /// In a notebook, where each code cell's text starts; `None` for a plain file.
    cells: Option<Vec<CellStart>>,
}

/// A code cell of a notebook inside the concatenated text the linter reads.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct CellStart {
    /// 1-based, counting every cell of the notebook (markdown too), as Jupyter shows them.
    number: usize,
    offset: usize,
    /// 0-based index of the cell's first line in the concatenated text.
    first_line: usize,
}

/// A code cell of a notebook, as [`SourceFile::notebook`] receives them: its 1-based number
/// and the byte offset where its text starts in the concatenated text.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Cell {
    pub number: usize,
    pub offset: usize,
}

/// A position as the user sees it: in a notebook, the cell and the row within that cell.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub struct DisplayLocation {
    /// The 1-based cell number; `None` for a plain file.
    pub cell: Option<usize>,
    pub row: usize,
    pub column: usize,
}

/// A 1-based row and a 1-based column counted in Unicode scalar values (Ruff's convention).
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub struct Location {
    pub row: usize,
    pub column: usize,
}

impl SourceFile {
    pub fn new(name: impl Into<PathBuf>, text: String) -> Self {
        let line_starts = std::iter::once(0).chain(line_breaks(&text)).collect();
        SourceFile {
            name: name.into(),
            text,
            line_starts,
            cells: None,
        }
    }

    /// A notebook's code cells concatenated into one text; `cells` says where each starts (in
    /// order, the first at offset 0). Rows and columns stay those of the concatenated text:
    /// only [`SourceFile::display_location`] speaks of cells.
    pub fn notebook(name: impl Into<PathBuf>, text: String, cells: &[Cell]) -> Self {
        let mut file = SourceFile::new(name, text);
        let mut starts: Vec<CellStart> = Vec::with_capacity(cells.len());
        for cell in cells {
            // Out-of-order or out-of-range starts would break the binary searches: drop them.
            let after_previous = starts.last().is_none_or(|last| last.offset < cell.offset);
            if after_previous && cell.offset <= file.text.len() {
                starts.push(CellStart {
                    number: cell.number,
                    offset: cell.offset,
                    first_line: file.line_index(cell.offset),
                });
            }
        }
        file.cells = Some(starts);
        file
    }

    pub fn is_notebook(&self) -> bool {
        self.cells.is_some()
    }

    pub fn name(&self) -> &Path {
        &self.name
    }

    pub fn text(&self) -> &str {
        &self.text
    }

    pub fn line_starts(&self) -> &[usize] {
        &self.line_starts
    }

    /// 0-based index of the line holding `offset`.
    pub fn line_index(&self, offset: usize) -> usize {
        match self.line_starts.binary_search(&offset) {
            Ok(line) => line,
            Err(next) => next - 1,
        }
    }

    /// Byte range of 0-based line `line`, without its line terminator.
    pub fn line_range(&self, line: usize) -> TextRange {
        let start = self.line_starts[line];
        let end = self
            .line_starts
            .get(line + 1)
            .copied()
            .unwrap_or(self.text.len());
        let content = &self.text[start..end];
        let trimmed = content.trim_end_matches(['\n', '\r']);
        start..start + trimmed.len()
    }

    pub fn location(&self, offset: usize) -> Location {
        let offset = self.floor_char_boundary(offset.min(self.text.len()));
        let line = self.line_index(offset);
        let start = self.line_starts[line];
        Location {
            row: line + 1,
            column: self.text[start..offset].chars().count() + 1,
        }
    }

    /// Where `offset` is shown: for a notebook, its cell and the row within the cell; for a
    /// plain file, the same row and column as [`SourceFile::location`].
    pub fn display_location(&self, offset: usize) -> DisplayLocation {
        let Some(cell) = self.cell_at(offset) else {
            let location = self.location(offset);
            return DisplayLocation {
                cell: None,
                row: location.row,
                column: location.column,
            };
        };
        // Past the cell's last line break lies the next cell, or at the notebook's end no line
        // at all: such offsets are shown at the end of the cell's last line.
        let location = self.location(offset.min(self.cell_content_end(cell)));
        DisplayLocation {
            cell: Some(cell.number),
            row: location.row.saturating_sub(cell.first_line).max(1),
            column: location.column,
        }
    }

    /// Where a range starts and ends as the user sees it. In a notebook the end is kept in the
    /// start's cell: a range that runs on into the next cell is cut at the cell's end.
    pub fn display_span(&self, range: &TextRange) -> (DisplayLocation, DisplayLocation) {
        let end = match self.cell_at(range.start) {
            Some(cell) => range.end.min(self.cell_content_end(cell)).max(range.start),
            None => range.end,
        };
        (
            self.display_location(range.start),
            self.display_location(end),
        )
    }

    /// The 1-based number and byte range of each code cell of a notebook, in order; nothing for
    /// a plain file. A cell's range runs to the next cell's start, so it ends with its last
    /// line break.
    pub fn cell_ranges(&self) -> impl Iterator<Item = (usize, TextRange)> + '_ {
        let cells = self.cells.as_deref().unwrap_or_default();
        cells
            .iter()
            .map(|cell| (cell.number, self.cell_range(cell)))
    }

    fn cell_range(&self, cell: &CellStart) -> TextRange {
        let cells = self.cells.as_deref().unwrap_or_default();
        let index = cells.partition_point(|other| other.offset <= cell.offset);
        let end = cells.get(index).map_or(self.text.len(), |next| next.offset);
        cell.offset..end
    }

    /// The end of the cell's last line, before its line break.
    fn cell_content_end(&self, cell: &CellStart) -> usize {
        let range = self.cell_range(cell);
        let last = range.end.saturating_sub(1).max(range.start);
        self.line_range(self.line_index(last)).end.max(range.start)
    }

    fn cell_at(&self, offset: usize) -> Option<&CellStart> {
        let cells = self.cells.as_deref()?;
        let index = cells
            .partition_point(|cell| cell.offset <= offset)
            .checked_sub(1)?;
        cells.get(index)
    }

    /// Byte offset of a 1-based row and column; clamps to the line's end.
    pub fn offset(&self, location: Location) -> usize {
        let line = location
            .row
            .saturating_sub(1)
            .min(self.line_starts.len() - 1);
        let range = self.line_range(line);
        let line_text = &self.text[range.clone()];
        let column = location.column.saturating_sub(1);
        range.start
            + line_text
                .char_indices()
                .nth(column)
                .map_or(line_text.len(), |(i, _)| i)
    }

    fn floor_char_boundary(&self, mut offset: usize) -> usize {
        while !self.text.is_char_boundary(offset) {
            offset -= 1;
        }
        offset
    }
}

/// Offsets where lines start after a break: `\n`, `\r\n` or a lone `\r`, as Python reads them.
fn line_breaks(text: &str) -> impl Iterator<Item = usize> + '_ {
    let bytes = text.as_bytes();
    memchr::memchr2_iter(b'\n', b'\r', bytes).filter_map(move |i| match bytes[i] {
        b'\r' if bytes.get(i + 1) == Some(&b'\n') => None,
        _ => Some(i + 1),
    })
}

/// Why a file's bytes could not be read as Python source.
#[derive(Debug, thiserror::Error, PartialEq)]
pub enum DecodeError {
    #[error(
        "the file looks binary (NUL byte at offset {offset}), and Python source cannot contain NUL bytes; exclude it (`extend-exclude`) or give it another extension"
    )]
    Binary { offset: usize },
    #[error(
        "not valid UTF-8 (invalid byte at line {line}) and no PEP 263 coding declaration; save it as UTF-8 or declare its encoding in a `# -*- coding: ... -*-` comment"
    )]
    NotUtf8 { line: usize },
    #[error(
        "not valid UTF-8 (invalid byte at line {line}) although its coding declaration says UTF-8; fix the bytes or the declaration"
    )]
    DeclaredUtf8 { line: usize },
    #[error(
        "declares the unknown encoding `{label}`; use an encoding Python knows, such as `utf-8` or `latin-1`"
    )]
    UnknownEncoding { label: String },
    #[error(
        "is not valid `{label}` as its coding declaration says; fix the declaration or re-save the file in that encoding"
    )]
    Malformed { label: String },
}

/// Decodes Python source bytes: UTF-8 (with or without BOM), or the encoding named by a
/// PEP 263 coding declaration in the first two lines.
pub fn decode(bytes: &[u8]) -> Result<String, DecodeError> {
    if let Some(offset) = memchr::memchr(0, bytes) {
        return Err(DecodeError::Binary { offset });
    }
    let bytes = bytes.strip_prefix(b"\xEF\xBB\xBF").unwrap_or(bytes);
    let declared = coding_declaration(bytes);
    match std::str::from_utf8(bytes) {
        Ok(text) if declared.is_none() => Ok(text.to_owned()),
        Ok(text) => {
            let label = declared.unwrap_or_default();
            if is_utf8_label(&label) {
                return Ok(text.to_owned());
            }
            match decode_with(bytes, label) {
                // A codec Python does not ship (`future_fstrings`, installed as a package): the
                // bytes are UTF-8, so read them as such, as Ruff does
                // ([`unknown_coding_declaration`] names it for a warning).
                Err(DecodeError::UnknownEncoding { .. }) => Ok(text.to_owned()),
                decoded => decoded,
            }
        }
        Err(error) => {
            let valid = &bytes[..error.valid_up_to()];
            let line = valid.iter().filter(|&&b| b == b'\n').count() + 1;
            match declared {
                Some(label) if !is_utf8_label(&label) => decode_with(bytes, label),
                Some(_) => Err(DecodeError::DeclaredUtf8 { line }),
                None => Err(DecodeError::NotUtf8 { line }),
            }
        }
    }
}

/// Whether [`decode`] gives `text` back unchanged from its own bytes (the editor's buffer is
/// linted as the file on disk would be). Answered without decoding a copy when, as nearly
/// always, the text has no BOM and declares no encoding other than UTF-8.
pub fn reads_as_itself(text: &str) -> bool {
    let bytes = text.as_bytes();
    if memchr::memchr(0, bytes).is_some() {
        return false;
    }
    if !bytes.starts_with(b"\xEF\xBB\xBF")
        && coding_declaration(bytes).is_none_or(|label| is_utf8_label(&label))
    {
        return true;
    }
    decode(bytes).is_ok_and(|decoded| decoded == text)
}

/// The label of a coding declaration that names no encoding torchlint knows, in a file whose
/// bytes are valid UTF-8: [`decode`] reads such a file as UTF-8, and the caller warns.
pub fn unknown_coding_declaration(bytes: &[u8]) -> Option<String> {
    let bytes = bytes.strip_prefix(b"\xEF\xBB\xBF").unwrap_or(bytes);
    let label = coding_declaration(bytes)?;
    if is_utf8_label(&label) || std::str::from_utf8(bytes).is_err() {
        return None;
    }
    matches!(
        decode_with(bytes, label.clone()),
        Err(DecodeError::UnknownEncoding { .. })
    )
    .then_some(label)
}

fn is_utf8_label(label: &str) -> bool {
    matches!(
        label.to_ascii_lowercase().replace('_', "-").as_str(),
        "utf-8" | "utf8" | "utf-8-sig"
    )
}

fn decode_with(bytes: &[u8], label: String) -> Result<String, DecodeError> {
    let Some(encoding) = encoding_rs::Encoding::for_label(label.replace('_', "-").as_bytes())
    else {
        // Python spells latin-1 as "latin-1"; WHATWG only knows "latin1", "l1", ...
        let normalized = label.to_ascii_lowercase().replace(['-', '_'], "");
        return match encoding_rs::Encoding::for_label(normalized.as_bytes()) {
            Some(encoding) => decode_strict(encoding, bytes, label),
            None => Err(DecodeError::UnknownEncoding { label }),
        };
    };
    decode_strict(encoding, bytes, label)
}

fn decode_strict(
    encoding: &'static encoding_rs::Encoding,
    bytes: &[u8],
    label: String,
) -> Result<String, DecodeError> {
    encoding
        .decode_without_bom_handling_and_without_replacement(bytes)
        .map(|text| text.into_owned())
        .ok_or(DecodeError::Malformed { label })
}

/// The encoding named in a PEP 263 declaration on line 1 or 2, if any.
fn coding_declaration(bytes: &[u8]) -> Option<String> {
    let mut lines = bytes.split(|&b| b == b'\n').take(2);
    let first = lines.next()?;
    let candidates = std::iter::once(first).chain(lines);
    for (i, line) in candidates.enumerate() {
        let line = String::from_utf8_lossy(line);
        let trimmed = line.trim_start();
        if !trimmed.starts_with('#') {
            // PEP 263: the second line counts only when the first is a comment (or blank).
            if i == 0 && !trimmed.is_empty() {
                return None;
            }
            continue;
        }
        if let Some(position) = trimmed.find("coding") {
            let rest = &trimmed[position + "coding".len()..];
            if let Some(rest) = rest.strip_prefix([':', '=']) {
                let label: String = rest
                    .trim_start()
                    .chars()
                    .take_while(|c| c.is_ascii_alphanumeric() || matches!(c, '-' | '_' | '.'))
                    .collect();
                if !label.is_empty() {
                    return Some(label);
                }
            }
        }
    }
    None
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn locations_count_characters_not_bytes() {
        let file = SourceFile::new("x.py", "a = 'é'; b\nc\n".into());
        assert_eq!(file.location(0), Location { row: 1, column: 1 });
        let b = file.text().find('b').unwrap();
        assert_eq!(file.location(b), Location { row: 1, column: 10 });
        assert_eq!(file.offset(Location { row: 1, column: 10 }), b);
        let c = file.text().find('c').unwrap();
        assert_eq!(file.location(c), Location { row: 2, column: 1 });
        assert_eq!(file.location(file.text().len()).row, 3);
    }

    #[test]
    fn a_text_reads_as_itself_exactly_when_decoding_its_bytes_gives_it_back() {
        let texts = [
            "x = 1\n",
            "# -*- coding: utf-8 -*-\nx = 'é'\n",
            "\u{feff}x = 1\n",
            "# -*- coding: latin-1 -*-\nx = 1\n",
            "# -*- coding: latin-1 -*-\nx = 'é'\n",
            "# coding: future_fstrings\nx = 'é'\n",
            "x = '\0'\n",
        ];
        for text in texts {
            let decoded = decode(text.as_bytes()).is_ok_and(|decoded| decoded == text);
            assert_eq!(reads_as_itself(text), decoded, "{text:?}");
        }
        assert!(reads_as_itself("x = 'é'\n"));
        assert!(!reads_as_itself("# -*- coding: latin-1 -*-\nx = 'é'\n"));
    }

    #[test]
    fn lone_carriage_returns_break_lines() {
        let file = SourceFile::new("x.py", "a = 1\rb = 2\r\nc = 3\n".into());
        let b = file.text().find('b').unwrap();
        let c = file.text().find('c').unwrap();
        assert_eq!(file.location(b), Location { row: 2, column: 1 });
        assert_eq!(file.location(c), Location { row: 3, column: 1 });
        assert_eq!(&file.text()[file.line_range(0)], "a = 1");
    }

    #[test]
    fn notebook_locations_are_cell_relative() {
        // Cells 2 and 4 of a notebook (1 and 3 are markdown).
        let text = "a = 1\nb = 2\nc = 'é'\n".to_owned();
        let cells = [
            Cell {
                number: 2,
                offset: 0,
            },
            Cell {
                number: 4,
                offset: 12,
            },
        ];
        let file = SourceFile::notebook("nb.ipynb", text, &cells);
        let at = |cell, row, column| DisplayLocation {
            cell: Some(cell),
            row,
            column,
        };
        let b = file.text().find('b').unwrap();
        assert_eq!(file.display_location(b), at(2, 2, 1));
        assert_eq!(file.location(b), Location { row: 2, column: 1 });
        assert_eq!(file.display_location(12), at(4, 1, 1));
        // The end of the text is shown at the end of the last cell's last line.
        assert_eq!(file.display_location(file.text().len()), at(4, 1, 8));
        // A range running into the next cell ends with its own cell.
        let (start, end) = file.display_span(&(b..file.text().len()));
        assert_eq!((start, end), (at(2, 2, 1), at(2, 2, 6)));
        assert_eq!(
            file.cell_ranges().collect::<Vec<_>>(),
            [(2, 0..12), (4, 12..file.text().len())]
        );
        let plain = SourceFile::new("x.py", "a\nb\n".into());
        assert_eq!(plain.display_location(2).cell, None);
        assert_eq!(plain.display_location(2).row, 2);
    }

    #[test]
    fn decodes_declared_latin1_and_rejects_undeclared_bytes() {
        let latin1 = b"# -*- coding: latin-1 -*-\nname = '\xe9'\n";
        assert!(decode(latin1).unwrap().contains("'é'"));
        let undeclared = b"x = 1\nname = '\xe9'\n";
        assert_eq!(decode(undeclared), Err(DecodeError::NotUtf8 { line: 2 }));
        assert!(matches!(
            decode(b"x = 1\0\0"),
            Err(DecodeError::Binary { offset: 5 })
        ));
        let late_nul = [b"x = 1\n".repeat(3000), b"\0".to_vec()].concat();
        assert!(matches!(decode(&late_nul), Err(DecodeError::Binary { .. })));
        assert_eq!(
            decode(b"# coding: utf-8\nx = '\xff'\n"),
            Err(DecodeError::DeclaredUtf8 { line: 2 })
        );
        assert_eq!(decode(b"\xEF\xBB\xBFx = 1\n").unwrap(), "x = 1\n");
        assert!(matches!(
            decode(b"# coding: klingon\nx = '\xff'\n"),
            Err(DecodeError::UnknownEncoding { .. })
        ));
    }

    #[test]
    fn unknown_codecs_over_utf8_bytes_are_read_as_utf8() {
        let source = "# -*- coding: future_fstrings -*-\nname = f'{x}é'\n".as_bytes();
        assert_eq!(
            decode(source).unwrap(),
            std::str::from_utf8(source).unwrap()
        );
        assert_eq!(
            unknown_coding_declaration(source).as_deref(),
            Some("future_fstrings")
        );
        // Known encodings and undeclared files need no warning.
        assert_eq!(
            unknown_coding_declaration(b"# coding: latin-1\nx = 1\n"),
            None
        );
        assert_eq!(unknown_coding_declaration(b"x = 1\n"), None);
        // Bytes that are not UTF-8 under an unknown codec are still refused.
        assert_eq!(
            unknown_coding_declaration(b"# coding: klingon\nx = '\xff'\n"),
            None
        );
    }
}

/// The kinds of files torchlint reads. Notebooks are turned into Python text plus a cell map
/// (`notebook`) before they reach `linter::lint_source`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum SourceKind {
    Python,
    Stub,
    Notebook,
}

impl SourceKind {
    pub fn from_path(path: &Path) -> Option<SourceKind> {
        match path.extension()?.to_str()? {
            "py" => Some(SourceKind::Python),
            "pyi" => Some(SourceKind::Stub),
            "ipynb" => Some(SourceKind::Notebook),
            _ => None,
        }
    }
}

/// Source text as a message or label quotes it: its first line (Python ends lines at `\n`, `\r`
/// or `\r\n`), cut to `max` characters with `...` where anything was left out, control
/// characters escaped (`\x1b`, `\t`: [`crate::escape`]), so that a finding stays one line in `concise` and
/// `github` output and cannot move a terminal's cursor. Every rule quotes code through it.
pub fn snippet(text: &str, max: usize) -> String {
    let end = memchr::memchr2(b'\n', b'\r', text.as_bytes()).unwrap_or(text.len());
    let line = &text[..end];
    let cut = line.chars().count() > max;
    let kept = if cut { max.saturating_sub(3) } else { max };
    let kept: String = line.chars().take(kept).collect();
    let mut shown = crate::escape::control_characters(&kept).into_owned();
    if cut || end < text.trim_end().len() {
        shown.push_str("...");
    }
    shown
}

#[cfg(test)]
mod snippet_tests {
    use super::snippet;

    #[test]
    fn quotes_one_line_of_code() {
        assert_eq!(snippet("loss.backward", 50), "loss.backward");
        // Python ends a line at `\n`, `\r\n` or a lone `\r`: every one leaves the rest out.
        assert_eq!(snippet("(loss\n * 2).backward", 50), "(loss...");
        assert_eq!(snippet("(loss\r\n * 2)", 50), "(loss...");
        assert_eq!(snippet("(loss\r * 2)", 50), "(loss...");
        assert_eq!(snippet("x = 1\n", 50), "x = 1");
        assert_eq!(snippet("abcdefghij", 8), "abcde...");
        assert_eq!(snippet("\"\u{1b}[2J\"", 50), "\"\\x1b[2J\"");
    }
}
