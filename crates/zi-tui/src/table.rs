//! Markdown tables as aligned columns (docs/interactive.md#the-screen): each column as wide as
//! its widest cell when the table fits; otherwise every column keeps at least its longest
//! word and the rest of the room goes to the columns with the most text, whose cells wrap
//! inside them. Columns are separated by ` │ `, the header by a `─┼─` rule; when a cell wraps,
//! a rule between body rows keeps them apart.

use pulldown_cmark::Alignment;
use ratatui::text::{Line, Span};

use crate::theme::Theme;
use crate::wrap::{text_width, wrap_line};

/// Between two columns.
const SEPARATOR: &str = " │ ";

/// One cell: its inline text as styled spans.
pub type Cell = Vec<Span<'static>>;

/// A table as the markdown parser delivered it.
#[derive(Debug, Clone, Default)]
pub struct Table {
    pub alignments: Vec<Alignment>,
    pub header: Vec<Cell>,
    pub rows: Vec<Vec<Cell>>,
}

fn cell_width(cell: &Cell) -> usize {
    cell.iter().map(|s| text_width(&s.content)).sum()
}

fn longest_word(cell: &Cell) -> usize {
    let text: String = cell.iter().map(|s| s.content.as_ref()).collect();
    text.split(' ').map(text_width).max().unwrap_or(0)
}

/// The widths of the columns whose widest cells are `natural` and longest words `words`, in
/// `available` cells (separators excluded). Every column gets at least one cell.
pub fn column_widths(natural: &[usize], words: &[usize], available: usize) -> Vec<usize> {
    let natural: Vec<usize> = natural.iter().map(|w| (*w).max(1)).collect();
    if natural.iter().sum::<usize>() <= available {
        return natural;
    }
    let minimum: Vec<usize> = natural
        .iter()
        .zip(words)
        .map(|(n, w)| (*w).clamp(1, *n))
        .collect();
    let floor: usize = minimum.iter().sum();
    if floor >= available {
        // Not even the longest words fit: share the room by them; words break inside.
        return share(&vec![1; minimum.len()], &minimum, available);
    }
    let wants: Vec<usize> = natural.iter().zip(&minimum).map(|(n, m)| n - m).collect();
    share(&minimum, &wants, available)
}

/// `base` plus the room left in `available` shared in proportion to `weights` (largest
/// remainders first), never more than `base + weight` for a column.
fn share(base: &[usize], weights: &[usize], available: usize) -> Vec<usize> {
    let mut widths = base.to_vec();
    let room = available.saturating_sub(base.iter().sum());
    let total: usize = weights.iter().sum();
    if total == 0 || room == 0 {
        return widths;
    }
    let room = room.min(total);
    let mut remainders: Vec<(usize, usize)> = Vec::with_capacity(weights.len());
    let mut given = 0;
    for (i, weight) in weights.iter().enumerate() {
        let exact = weight * room;
        widths[i] += exact / total;
        given += exact / total;
        remainders.push((exact % total, i));
    }
    remainders.sort_by(|a, b| b.0.cmp(&a.0).then(a.1.cmp(&b.1)));
    for (_, i) in remainders.into_iter().take(room - given) {
        widths[i] += 1;
    }
    widths
}

/// `line` padded to `width` cells as `alignment` asks.
fn aligned(line: Line<'static>, width: usize, alignment: Alignment) -> Vec<Span<'static>> {
    let used: usize = line.spans.iter().map(|s| text_width(&s.content)).sum();
    let pad = width.saturating_sub(used);
    let (left, right) = match alignment {
        Alignment::Right => (pad, 0),
        Alignment::Center => (pad / 2, pad - pad / 2),
        Alignment::Left | Alignment::None => (0, pad),
    };
    let mut spans = Vec::with_capacity(line.spans.len() + 2);
    if left > 0 {
        spans.push(Span::raw(" ".repeat(left)));
    }
    spans.extend(line.spans);
    if right > 0 {
        spans.push(Span::raw(" ".repeat(right)));
    }
    spans
}

impl Table {
    fn columns(&self) -> usize {
        self.rows
            .iter()
            .map(Vec::len)
            .chain([self.header.len(), self.alignments.len()])
            .max()
            .unwrap_or(0)
    }

    fn all_rows(&self) -> impl Iterator<Item = &Vec<Cell>> {
        std::iter::once(&self.header).chain(&self.rows)
    }

    /// The widths of the columns in `width` cells.
    pub fn widths(&self, width: usize) -> Vec<usize> {
        let columns = self.columns();
        let mut natural = vec![0; columns];
        let mut words = vec![0; columns];
        for row in self.all_rows() {
            for (i, cell) in row.iter().enumerate() {
                natural[i] = natural[i].max(cell_width(cell));
                words[i] = words[i].max(longest_word(cell));
            }
        }
        let separators = text_width(SEPARATOR) * columns.saturating_sub(1);
        let available = width.saturating_sub(separators);
        column_widths(&natural, &words, available.max(columns))
    }

    /// The table's rows at `width` cells (trailing padding trimmed).
    pub fn lines(&self, width: usize, theme: &Theme) -> Vec<Line<'static>> {
        let columns = self.columns();
        if columns == 0 {
            return Vec::new();
        }
        let widths = self.widths(width);
        let header = self.row_lines(&self.header, &widths, theme, true);
        let body: Vec<Vec<Line<'static>>> = self
            .rows
            .iter()
            .map(|row| self.row_lines(row, &widths, theme, false))
            .collect();
        let rule = Line::styled(
            widths
                .iter()
                .map(|w| "─".repeat(*w))
                .collect::<Vec<_>>()
                .join("─┼─"),
            theme.dim(),
        );
        let wrapped = body.iter().any(|lines| lines.len() > 1);
        let mut out = header;
        out.push(rule.clone());
        for (n, lines) in body.into_iter().enumerate() {
            if n > 0 && wrapped {
                out.push(rule.clone());
            }
            out.extend(lines);
        }
        out
    }

    /// One table row: its cells wrapped in their columns, side by side.
    fn row_lines(
        &self,
        row: &[Cell],
        widths: &[usize],
        theme: &Theme,
        header: bool,
    ) -> Vec<Line<'static>> {
        let style = if header { theme.bold() } else { theme.plain() };
        let cells: Vec<Vec<Line<'static>>> = widths
            .iter()
            .enumerate()
            .map(|(i, width)| {
                let spans = row.get(i).cloned().unwrap_or_default();
                wrap_line(&Line::from(spans).patch_style(style), *width, &[])
            })
            .collect();
        let height = cells.iter().map(Vec::len).max().unwrap_or(1);
        (0..height)
            .map(|r| {
                let mut spans: Vec<Span<'static>> = Vec::new();
                for (i, (cell, width)) in cells.iter().zip(widths).enumerate() {
                    if i > 0 {
                        spans.push(Span::styled(SEPARATOR, theme.dim()));
                    }
                    let line = cell.get(r).cloned().unwrap_or_default();
                    let alignment = self.alignments.get(i).copied().unwrap_or(Alignment::None);
                    spans.extend(aligned(line, *width, alignment));
                }
                trim_end(&mut spans);
                Line::from(spans)
            })
            .collect()
    }
}

/// Drops the padding after the last cell's text.
fn trim_end(spans: &mut Vec<Span<'static>>) {
    while let Some(last) = spans.last_mut() {
        let kept = last.content.trim_end_matches(' ').len();
        if kept > 0 {
            last.content.to_mut().truncate(kept);
            return;
        }
        spans.pop();
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn cell(text: &str) -> Cell {
        vec![Span::raw(text.to_string())]
    }

    fn table(rows: &[&[&str]], alignments: Vec<Alignment>) -> Table {
        Table {
            alignments,
            header: rows[0].iter().map(|t| cell(t)).collect(),
            rows: rows[1..]
                .iter()
                .map(|r| r.iter().map(|t| cell(t)).collect())
                .collect(),
        }
    }

    fn texts(lines: &[Line<'_>]) -> Vec<String> {
        lines.iter().map(|l| l.to_string()).collect()
    }

    #[test]
    fn a_table_that_fits_gets_its_natural_widths() {
        use Alignment::*;
        let table = table(
            &[
                &["Name", "Size", "Kind"],
                &["a.txt", "12", "text"],
                &["bin", "1234", "elf"],
            ],
            vec![Left, Right, Center],
        );
        assert_eq!(
            texts(&table.lines(80, &Theme::new(true))),
            [
                "Name  │ Size │ Kind",
                "──────┼──────┼─────",
                "a.txt │   12 │ text",
                "bin   │ 1234 │ elf",
            ]
        );
    }

    #[test]
    fn widths_keep_the_longest_words_and_share_the_rest_by_text() {
        // Fits: natural widths.
        assert_eq!(column_widths(&[4, 10], &[4, 5], 20), [4, 10]);
        // Too wide: each keeps its longest word; the rest goes where the text is.
        assert_eq!(column_widths(&[5, 40, 20], &[5, 8, 6], 30), [5, 16, 9]);
        // Not even the words fit: the room is shared by them, at least one cell each.
        assert_eq!(column_widths(&[30, 30], &[30, 10], 8), [6, 2]);
        assert_eq!(column_widths(&[3, 3, 3], &[3, 3, 3], 2), [1, 1, 1]);
        // Never more than the room (when the room allows one cell a column).
        for available in 3..60 {
            let widths = column_widths(&[12, 50, 7], &[6, 9, 7], available);
            assert_eq!(
                widths.iter().sum::<usize>(),
                available.min(69),
                "{available}"
            );
        }
    }

    #[test]
    fn narrow_tables_wrap_cells_inside_their_columns() {
        let table = table(
            &[
                &["File", "Note"],
                &["a.txt", "the first file of the two"],
                &["b.txt", "short"],
            ],
            vec![],
        );
        let lines = texts(&table.lines(20, &Theme::new(true)));
        assert_eq!(
            lines,
            [
                "File  │ Note",
                "──────┼─────────────",
                "a.txt │ the first",
                "      │ file of the",
                "      │ two",
                "──────┼─────────────",
                "b.txt │ short",
            ]
        );
        assert!(lines.iter().all(|l| text_width(l) <= 20));
    }

    #[test]
    fn ragged_rows_get_empty_cells() {
        let table = table(&[&["a", "b"], &["1"], &["1", "2", "3"]], vec![]);
        // The separators stay in their columns.
        assert_eq!(
            texts(&table.lines(40, &Theme::new(true))),
            ["a │ b │", "──┼───┼──", "1 │   │", "1 │ 2 │ 3"]
        );
    }
}
