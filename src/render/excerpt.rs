//! Long lines cut down to the parts a finding points at. codespan prints every line a label
//! touches whole, so a finding on a minified or generated file (a line of megabytes) would print
//! that line once per finding: output quadratic in the line's length. Like rustc and Ruff, the
//! full format shows a window around each labelled point instead, with `…` where text was left
//! out; line and column numbers stay those of the file.

use std::ops::Range;

/// Lines up to this many bytes are shown whole.
pub(super) const LONGEST_LINE: usize = 200;
/// Bytes kept on each side of a point a label marks, on a line longer than `LONGEST_LINE`.
const CONTEXT: usize = 60;
/// Lines after a label's first line and before its last that codespan shows (its default
/// `start_context_lines` and `end_context_lines`); the lines between are never printed.
const SHOWN_AFTER_START: usize = 3;
const SHOWN_BEFORE_END: usize = 1;
const ELLIPSIS: &str = "…";

/// The lines of one view from the first a finding's labels touch to the last, each cut to
/// windows around the points the labels mark.
pub(super) struct Excerpt {
    pub(super) text: String,
    pub(super) line_starts: Vec<usize>,
    /// The view's index of the excerpt's first line.
    pub(super) first_line: usize,
    /// Copied text: (start in the excerpt, start in the view, length), in order.
    pieces: Vec<(usize, usize, usize)>,
}

impl Excerpt {
    /// The excerpt of `text` (whose lines start at `line_starts`) for labels marking `points`,
    /// or `None` when every line that would be shown is short enough to show whole.
    pub(super) fn cut(text: &str, line_starts: &[usize], points: &[usize]) -> Option<Excerpt> {
        let line_of = |offset: usize| line_starts.partition_point(|&s| s <= offset).max(1) - 1;
        let mut point_lines: Vec<usize> = points.iter().map(|&p| line_of(p)).collect();
        point_lines.sort_unstable();
        point_lines.dedup();
        let (&first, &last) = (point_lines.first()?, point_lines.last()?);
        let content = |line: usize| {
            let start = line_starts[line];
            let end = line_starts.get(line + 1).copied().unwrap_or(text.len());
            let line_text = &text[start..end];
            let trimmed = line_text.trim_end_matches(['\n', '\r']);
            start..start + trimmed.len()
        };
        // A line codespan may print: one a label marks, or a context line next to one.
        let shown = |line: usize| {
            let at = point_lines.partition_point(|&l| l < line);
            point_lines.get(at) == Some(&line)
                || at > 0 && line - point_lines[at - 1] <= SHOWN_AFTER_START
                || point_lines
                    .get(at)
                    .is_some_and(|&next| next - line <= SHOWN_BEFORE_END)
        };
        if !(first..=last).any(|line| shown(line) && content(line).len() > LONGEST_LINE) {
            return None;
        }
        let mut excerpt = Excerpt {
            text: String::new(),
            line_starts: Vec::with_capacity(last - first + 1),
            first_line: first,
            pieces: Vec::new(),
        };
        for line in first..=last {
            excerpt.line_starts.push(excerpt.text.len());
            if shown(line) {
                let range = content(line);
                let marked: Vec<usize> = points
                    .iter()
                    .copied()
                    .filter(|&p| line_of(p) == line)
                    .collect();
                excerpt.push_line(text, range, &marked);
            }
            excerpt.text.push('\n');
        }
        Some(excerpt)
    }

    /// Copies one line's content, whole when short, else the windows around `marked`.
    fn push_line(&mut self, text: &str, line: Range<usize>, marked: &[usize]) {
        if line.len() <= LONGEST_LINE {
            self.copy(text, line);
            return;
        }
        // A line nothing points at (context around a marked one) shows its start.
        let mut windows: Vec<Range<usize>> = if marked.is_empty() {
            std::iter::once(line.start..line.start + LONGEST_LINE).collect()
        } else {
            marked
                .iter()
                .map(|&p| p.saturating_sub(CONTEXT).max(line.start)..(p + CONTEXT).min(line.end))
                .collect()
        };
        windows.sort_by_key(|w| w.start);
        let mut merged: Vec<Range<usize>> = Vec::new();
        for window in windows {
            let window = floor_char(text, window.start)..ceil_char(text, window.end);
            match merged.last_mut() {
                Some(previous) if window.start <= previous.end + ELLIPSIS.len() => {
                    previous.end = previous.end.max(window.end);
                }
                _ => merged.push(window),
            }
        }
        let mut at = line.start;
        for window in merged {
            if window.start > at {
                self.text.push_str(ELLIPSIS);
            }
            at = window.end;
            self.copy(text, window);
        }
        if at < line.end {
            self.text.push_str(ELLIPSIS);
        }
    }

    fn copy(&mut self, text: &str, range: Range<usize>) {
        self.pieces
            .push((self.text.len(), range.start, range.end - range.start));
        self.text.push_str(&text[range]);
    }

    /// Where an offset of the view is in the excerpt; the points the excerpt was cut for are
    /// always in it.
    pub(super) fn to_excerpt(&self, offset: usize) -> usize {
        let at = self
            .pieces
            .partition_point(|&(_, start, _)| start <= offset)
            .saturating_sub(1);
        match self.pieces.get(at) {
            Some(&(excerpt, start, len)) => excerpt + (offset - start).min(len),
            None => 0,
        }
    }

    /// Where an offset of the excerpt is in the view (text codespan shows, so in a piece or
    /// on an ellipsis next to one).
    pub(super) fn to_view(&self, offset: usize) -> usize {
        let at = self
            .pieces
            .partition_point(|&(start, _, _)| start <= offset)
            .saturating_sub(1);
        match self.pieces.get(at) {
            Some(&(excerpt, start, len)) => start + (offset.saturating_sub(excerpt)).min(len),
            None => 0,
        }
    }
}

fn floor_char(text: &str, mut at: usize) -> usize {
    while !text.is_char_boundary(at) {
        at -= 1;
    }
    at
}

fn ceil_char(text: &str, mut at: usize) -> usize {
    while !text.is_char_boundary(at) {
        at += 1;
    }
    at
}

#[cfg(test)]
mod tests {
    use super::*;

    fn starts(text: &str) -> Vec<usize> {
        std::iter::once(0)
            .chain(text.match_indices('\n').map(|(i, _)| i + 1))
            .collect()
    }

    #[test]
    fn short_lines_are_not_cut() {
        let text = "import torch\nx = torch.load(f)\n";
        assert!(Excerpt::cut(text, &starts(text), &[17, 30]).is_none());
    }

    #[test]
    fn a_long_line_keeps_a_window_around_each_point() {
        let line = "a = 1; ".repeat(100) + "t = torch.load(f)" + &"; b = 2".repeat(100);
        let text = format!("import torch\n{line}\n");
        let start = text.find("t = torch").unwrap();
        let end = start + "t = torch.load(f)".len();
        let excerpt = Excerpt::cut(&text, &starts(&text), &[start, end]).unwrap();
        assert_eq!(excerpt.first_line, 1);
        assert!(excerpt.text.starts_with('…'));
        assert!(excerpt.text.trim_end().ends_with('…'));
        assert!(excerpt.text.len() < 2 * CONTEXT + 40, "{}", excerpt.text);
        let (s, e) = (excerpt.to_excerpt(start), excerpt.to_excerpt(end));
        assert_eq!(&excerpt.text[s..e], "t = torch.load(f)");
        assert_eq!(excerpt.to_view(s), start);
    }

    #[test]
    fn windows_never_split_a_character() {
        let line = "é".repeat(300);
        let text = format!("{line}\n");
        let excerpt = Excerpt::cut(&text, &starts(&text), &[300]).unwrap();
        assert!(excerpt.text.contains('é'));
    }
}
