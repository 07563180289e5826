//! Plain-text tables, aligned like kubectl's, with optional colour.

/// A table: a header and rows of cells.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Table {
    pub header: Vec<&'static str>,
    pub rows: Vec<Vec<String>>,
}

/// ANSI colours, used only on a terminal (and never with `NO_COLOR`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Colour {
    Green,
    Yellow,
    Red,
    Dim,
}

impl Colour {
    fn code(self) -> &'static str {
        match self {
            Colour::Green => "32",
            Colour::Yellow => "33",
            Colour::Red => "31",
            Colour::Dim => "2",
        }
    }
}

/// Paints `text` when `on`.
pub fn paint(text: &str, colour: Colour, on: bool) -> String {
    if on {
        format!("\u{1b}[{}m{text}\u{1b}[0m", colour.code())
    } else {
        text.to_string()
    }
}

/// Width of `s` as a terminal shows it (ANSI escapes take none).
fn width(s: &str) -> usize {
    let mut w = 0;
    let mut esc = false;
    for c in s.chars() {
        match (esc, c) {
            (false, '\u{1b}') => esc = true,
            (true, 'm') => esc = false,
            (true, _) => {}
            (false, _) => w += 1,
        }
    }
    w
}

impl Table {
    pub fn new(header: Vec<&'static str>) -> Self {
        Self {
            header,
            rows: Vec::new(),
        }
    }

    /// Columns separated by three spaces, the last not padded; `empty`
    /// when there are no rows (kubectl's "No resources found").
    pub fn render(&self, empty: &str) -> String {
        if self.rows.is_empty() {
            return format!("{empty}\n");
        }
        let mut widths: Vec<usize> = self.header.iter().map(|h| h.len()).collect();
        for r in &self.rows {
            for (i, c) in r.iter().enumerate() {
                if i < widths.len() {
                    widths[i] = widths[i].max(width(c));
                }
            }
        }
        let mut out = String::new();
        let line = |cells: Vec<&str>, out: &mut String| {
            let n = cells.len();
            for (i, c) in cells.into_iter().enumerate() {
                out.push_str(c);
                if i + 1 < n {
                    out.push_str(&" ".repeat(widths[i] - width(c) + 3));
                }
            }
            out.push('\n');
        };
        line(self.header.clone(), &mut out);
        for r in &self.rows {
            line(r.iter().map(String::as_str).collect(), &mut out);
        }
        out
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn columns_align_and_colour_takes_no_width() {
        let mut t = Table::new(vec!["NAME", "STATE"]);
        t.rows
            .push(vec!["a-long-name".into(), paint("Admitted", Colour::Green, true)]);
        t.rows.push(vec!["b".into(), "Pending".into()]);
        let out = t.render("nothing");
        let lines: Vec<&str> = out.lines().collect();
        assert_eq!(lines[0], "NAME          STATE");
        assert_eq!(lines[2], "b             Pending");
        assert!(lines[1].starts_with("a-long-name   \u{1b}[32mAdmitted"));
        assert_eq!(
            Table::new(vec!["X"]).render("No workloads found."),
            "No workloads found.\n"
        );
    }
}
