//! Fixes in a notebook: the edits of findings, made in the joined text of the code cells, put
//! back into the cells' `source` in the `.ipynb` JSON, and everything else of the file kept
//! byte for byte (outputs, metadata, key order, indentation, the cells no fix touched).
//!
//! The JSON is read a second time here, with the byte range of each cell's `source`: serde
//! hands back borrowed raw values, which are slices of the file's own bytes. A changed cell's
//! source is written in the shape it had (a list of lines at its indentation, or one string),
//! and its unchanged lines keep their original JSON text (escapes included).

use serde::Deserialize;
use serde_json::value::RawValue;

use super::{python_code, replace_lone_surrogates, split_lines};
use std::ops::Range;

/// The code cells of a notebook as its JSON holds them, and where each lands in the joined text
/// the linter read.
pub struct CellSources<'b> {
    bytes: &'b [u8],
    /// The joined text, exactly as [`super::read`] builds it.
    text: String,
    cells: Vec<CodeCell<'b>>,
}

struct CodeCell<'b> {
    /// The cell's `source` value in the file's bytes.
    raw: Range<usize>,
    /// The `source` as stored: one string, or its lines (each element's JSON text and value).
    shape: Shape<'b>,
    /// The source's text, and its lines as the linter read them (IPython syntax replaced).
    source: String,
    python: String,
    /// Where the cell's Python starts in the joined text.
    offset: usize,
}

enum Shape<'b> {
    String,
    /// Each line's JSON text and value, and the list's layout ([`list_layout`]).
    Lines {
        lines: Vec<(&'b str, String)>,
        layout: Option<(&'b str, &'b str)>,
    },
}

#[derive(Deserialize)]
struct Notebook<'a> {
    #[serde(borrow)]
    cells: Vec<Cell<'a>>,
}

#[derive(Deserialize)]
struct Cell<'a> {
    cell_type: String,
    #[serde(borrow)]
    source: Option<&'a RawValue>,
}

impl<'b> CellSources<'b> {
    /// The cells of a notebook's bytes (a BOM allowed); `None` for bytes that do not read as
    /// a notebook of this shape (a key written twice among them: which one Jupyter keeps is the
    /// last, and a fix would have to guess).
    pub fn read(bytes: &'b [u8]) -> Option<Self> {
        let start = if bytes.starts_with(b"\xEF\xBB\xBF") {
            3
        } else {
            0
        };
        // A lone surrogate, which the linter's reading replaces, cannot be read back here (a
        // Rust string cannot hold it): such a notebook is not fixed.
        if *replace_lone_surrogates(&bytes[start..]) != bytes[start..] {
            return None;
        }
        let json = std::str::from_utf8(&bytes[start..]).ok()?;
        let notebook: Notebook<'b> = serde_json::from_str(json).ok()?;
        let mut text = String::new();
        let mut cells = Vec::new();
        for cell in &notebook.cells {
            let Some(raw) = cell.source else {
                continue;
            };
            let raw_text = raw.get();
            let shape = if raw_text.starts_with('[') {
                let elements: Vec<&'b RawValue> = serde_json::from_str(raw_text).ok()?;
                Shape::Lines {
                    lines: elements
                        .into_iter()
                        .map(|element| {
                            serde_json::from_str::<String>(element.get())
                                .ok()
                                .map(|value| (element.get(), value))
                        })
                        .collect::<Option<_>>()?,
                    layout: list_layout(raw_text),
                }
            } else {
                Shape::String
            };
            let source = match &shape {
                Shape::String => serde_json::from_str::<String>(raw_text).ok()?,
                Shape::Lines { lines, .. } => lines.iter().map(|(_, line)| line.as_str()).collect(),
            };
            if cell.cell_type != "code" || source.is_empty() {
                continue;
            }
            let python = python_code(&source);
            let offset = text.len();
            text.push_str(&python);
            if !text.ends_with('\n') {
                text.push('\n');
            }
            // A slice of `json`: where it starts in the file.
            let at = raw_text.as_ptr() as usize - json.as_ptr() as usize + start;
            cells.push(CodeCell {
                raw: at..at + raw_text.len(),
                shape,
                source,
                python,
                offset,
            });
        }
        Some(CellSources { bytes, text, cells })
    }

    /// The joined text of the code cells, as the linter read it.
    pub fn text(&self) -> &str {
        &self.text
    }

    /// Whether an edit of this range of the joined text can be made in a cell: it lies within
    /// one cell, on lines the linter read as they are (not IPython syntax it replaced).
    pub fn maps(&self, range: Range<usize>) -> bool {
        self.locate(range).is_some()
    }

    /// The notebook's bytes with these edits of the joined text (a range and what replaces it)
    /// made in its cells: each one [`maps`](Self::maps), any other is left out.
    pub fn apply<'e>(&self, edits: impl IntoIterator<Item = (Range<usize>, &'e str)>) -> Vec<u8> {
        let mut by_cell: Vec<Vec<(Range<usize>, &str)>> = vec![Vec::new(); self.cells.len()];
        for (range, content) in edits {
            if let Some((cell, range)) = self.locate(range) {
                by_cell[cell].push((range, content));
            }
        }
        let mut out = Vec::with_capacity(self.bytes.len() + 64);
        let mut at = 0;
        for (cell, mut edits) in self.cells.iter().zip(by_cell) {
            if edits.is_empty() {
                continue;
            }
            edits.sort_by_key(|(range, _)| (range.start, range.end));
            let mut source = String::with_capacity(cell.source.len() + 32);
            let mut from = 0;
            for (range, content) in edits {
                source.push_str(&cell.source[from..range.start]);
                source.push_str(content);
                from = range.end;
            }
            source.push_str(&cell.source[from..]);
            out.extend_from_slice(&self.bytes[at..cell.raw.start]);
            out.extend_from_slice(cell.written(&source).as_bytes());
            at = cell.raw.end;
        }
        out.extend_from_slice(&self.bytes[at..]);
        out
    }

    /// The cell an edit falls in, and the range it replaces in that cell's source.
    fn locate(&self, range: Range<usize>) -> Option<(usize, Range<usize>)> {
        if range.end < range.start {
            return None;
        }
        let cell = self
            .cells
            .partition_point(|cell| cell.offset <= range.start)
            .checked_sub(1)?;
        let code = &self.cells[cell];
        let start = range.start - code.offset;
        // The line break the joining added after a cell without one is no part of its source.
        let end = (range.end - code.offset).min(code.python.len());
        let next = self
            .cells
            .get(cell + 1)
            .map_or(self.text.len(), |next| next.offset);
        if start > end || range.end > next {
            return None;
        }
        Some((cell, code.source_range(start, end)?))
    }
}

impl CodeCell<'_> {
    /// The range of the source that `start..end` of the cell's Python is, where every line it
    /// touches is the same in both.
    fn source_range(&self, start: usize, end: usize) -> Option<Range<usize>> {
        let python = split_lines(&self.python);
        let source = split_lines(&self.source);
        let mut python_at = 0;
        let mut source_at = 0;
        let mut mapped = (None, None);
        for (line, original) in python.iter().zip(&source) {
            let python_end = python_at + line.content.len() + line.terminator.len();
            let touched = start < python_end.max(python_at + 1) && python_at <= end;
            if touched
                && (line.content != original.content || line.terminator != original.terminator)
            {
                return None;
            }
            for (offset, slot) in [(start, &mut mapped.0), (end, &mut mapped.1)] {
                if slot.is_none() && offset >= python_at && offset < python_end {
                    *slot = Some(source_at + offset - python_at);
                }
            }
            python_at = python_end;
            source_at += original.content.len() + original.terminator.len();
        }
        // An offset at the very end of the cell.
        let at_end = |offset: usize| (offset == python_at).then_some(source_at);
        let start = mapped.0.or_else(|| at_end(start))?;
        let end = mapped.1.or_else(|| at_end(end))?;
        Some(start..end)
    }

    /// The JSON text of `source` for this cell, in the shape its `source` had: a list of lines
    /// keeps its indentation and the JSON text of the lines it shares with the old source at
    /// its start and end; a single string stays one.
    fn written(&self, source: &str) -> String {
        let Shape::Lines { lines: old, layout } = &self.shape else {
            return json_string(source);
        };
        let lines: Vec<&str> = source.split_inclusive('\n').collect();
        let same_start = lines
            .iter()
            .zip(old)
            .take_while(|(new, (_, old))| *new == old)
            .count();
        let same_end = lines
            .iter()
            .rev()
            .zip(old.iter().rev())
            .take_while(|(new, (_, old))| *new == old)
            .count()
            .min(lines.len() - same_start)
            .min(old.len() - same_start.min(old.len()));
        let elements: Vec<String> = lines
            .iter()
            .enumerate()
            .map(|(index, line)| {
                let from_end = lines.len() - index;
                if index < same_start {
                    old[index].0.to_owned()
                } else if from_end <= same_end {
                    old[old.len() - from_end].0.to_owned()
                } else {
                    json_string(line)
                }
            })
            .collect();
        match layout {
            Some((inner, outer)) if !elements.is_empty() => format!(
                "[\n{inner}{}\n{outer}]",
                elements.join(&format!(",\n{inner}"))
            ),
            _ => format!("[{}]", elements.join(", ")),
        }
    }
}

/// The indentation of a list's elements and of its closing bracket, where it is written one
/// element a line (as Jupyter writes a cell's source); `None` for a list on one line.
fn list_layout(raw: &str) -> Option<(&str, &str)> {
    let after_open = raw
        .strip_prefix('[')?
        .strip_prefix('\n')
        .or_else(|| raw.strip_prefix('[')?.strip_prefix("\r\n"))?;
    let inner = &after_open[..after_open.len() - after_open.trim_start_matches([' ', '\t']).len()];
    let before_close = raw.strip_suffix(']')?;
    let outer = &before_close[before_close.trim_end_matches([' ', '\t']).len()..];
    Some((inner, outer))
}

/// A JSON string as Jupyter writes one (Python's `json` with `ensure_ascii=False`: control
/// characters escaped, everything else as it is).
fn json_string(text: &str) -> String {
    serde_json::to_string(text).expect("a string serialises")
}

#[cfg(test)]
mod tests {
    use super::*;

    fn notebook(sources: &[&str]) -> String {
        let cells: Vec<serde_json::Value> = sources
            .iter()
            .map(|source| {
                serde_json::json!({"cell_type": "code", "metadata": {}, "outputs": [],
                    "source": source.split_inclusive('\n').collect::<Vec<_>>()})
            })
            .collect();
        serde_json::to_string_pretty(&serde_json::json!({"cells": cells, "metadata": {}})).unwrap()
    }

    fn sources(bytes: &[u8]) -> Vec<String> {
        let value: serde_json::Value = serde_json::from_slice(bytes).unwrap();
        value["cells"]
            .as_array()
            .unwrap()
            .iter()
            .map(|cell| {
                cell["source"]
                    .as_array()
                    .unwrap()
                    .iter()
                    .map(|line| line.as_str().unwrap())
                    .collect()
            })
            .collect()
    }

    #[test]
    fn an_edit_after_a_magic_line_lands_in_its_own_line_of_the_cell() {
        let json = notebook(&["x = 1", "%time y = 2\nloss_sum += loss"]);
        let cells = CellSources::read(json.as_bytes()).unwrap();
        // `pass` stands for the magic line in the joined text: 4 bytes where the cell has 11.
        assert_eq!(cells.text(), "x = 1\npass\nloss_sum += loss\n");
        let at = cells.text().find("loss\n").unwrap();
        let fixed = cells.apply([(at..at + 4, "loss.item()")]);
        assert_eq!(
            sources(&fixed),
            ["x = 1", "%time y = 2\nloss_sum += loss.item()"]
        );
    }

    #[test]
    fn an_edit_of_ipython_syntax_or_across_cells_does_not_map() {
        let json = notebook(&["x = 1", "!pip install torch\ny = 2"]);
        let cells = CellSources::read(json.as_bytes()).unwrap();
        let pass = cells.text().find("pass").unwrap();
        assert!(!cells.maps(pass..pass + 4));
        assert!(!cells.maps(2..8), "from the first cell into the second");
        let y = cells.text().find("y = 2").unwrap();
        assert!(cells.maps(y..y + 5));
    }

    #[test]
    fn removing_a_cells_last_line_takes_the_line_break_the_joining_added() {
        let json = notebook(&["import torch\ntorch.cuda.empty_cache()", "z = 3"]);
        let cells = CellSources::read(json.as_bytes()).unwrap();
        let start = cells.text().find("torch.cuda").unwrap();
        let end = cells.text().find("z = 3").unwrap();
        let fixed = cells.apply([(start..end, "")]);
        assert_eq!(sources(&fixed), ["import torch\n", "z = 3"]);
    }
}
