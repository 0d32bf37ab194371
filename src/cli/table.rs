//! Plain-text tables for the operator commands (`check`, `tools`, `calls`, `auth list`): columns padded to their
//! widest cell, no trailing spaces; every cell is shown [`escaped`], since agents and backends choose most of them
//! (tool names and descriptions, principals, scopes).

use super::terminal::escaped;

/// The first line of `text`, cut to `max` characters (the last one an ellipsis when cut).
pub fn first_line(text: &str, max: usize) -> String {
    let line = text.lines().next().unwrap_or_default();
    if line.chars().count() <= max { line.to_owned() } else { line.chars().take(max - 1).chain(['…']).collect() }
}

pub fn print_table<const N: usize>(header: [&str; N], rows: Vec<[String; N]>) {
    print!("{}", render_table(header, rows));
}

fn render_table<const N: usize>(header: [&str; N], rows: Vec<[String; N]>) -> String {
    let rows: Vec<[String; N]> = rows.into_iter().map(|row| row.map(|cell| escaped(&cell).into_owned())).collect();
    let mut widths = header.map(|title| title.chars().count());
    for row in &rows {
        for (width, cell) in widths.iter_mut().zip(row) {
            *width = (*width).max(cell.chars().count());
        }
    }
    let line = |cells: [&str; N]| {
        let padded: Vec<String> = cells.iter().zip(widths).map(|(cell, width)| format!("{cell:<width$}")).collect();
        format!("{}\n", padded.join("  ").trim_end())
    };
    let mut table = line(header);
    for row in &rows {
        table.push_str(&line(row.each_ref().map(String::as_str)));
    }
    table
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn cells_are_padded_and_escaped() {
        let rows = vec![
            ["files".to_owned(), "read write".to_owned()],
            ["evil\u{1b}]0;x\u{7}".to_owned(), "scope\u{9b}2J\u{202e}".to_owned()],
        ];
        let table = render_table(["BACKEND", "SCOPES"], rows);
        assert_eq!(
            table,
            "BACKEND               SCOPES\nfiles                 read write\nevil\\u001b]0;x\\u0007  scope\\u009b2J\\u202e\n",
            "the widths are those of the escaped cells"
        );
    }
}
