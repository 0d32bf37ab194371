//! Plain-text tables for the operator commands (`check`, `tools`, `calls`): columns padded to their widest cell,
//! no trailing spaces.

pub fn print_table<const N: usize>(header: [&str; N], rows: Vec<[String; N]>) {
    let mut widths = header.map(|title| title.chars().count());
    for row in &rows {
        for (width, cell) in widths.iter_mut().zip(row) {
            *width = (*width).max(cell.chars().count());
        }
    }
    let line = |cells: [&str; N]| {
        let padded: Vec<String> = cells.iter().zip(widths).map(|(cell, width)| format!("{cell:<width$}")).collect();
        println!("{}", padded.join("  ").trim_end());
    };
    line(header);
    for row in &rows {
        line(row.each_ref().map(String::as_str));
    }
}
