//! Plain text tables.

/// A table: header, rows, right-aligned numeric columns (all but the last, by default the name).
pub struct Table {
    header: Vec<String>,
    rows: Vec<Vec<String>>,
    /// Columns aligned left.
    left: Vec<usize>,
}

impl Table {
    pub fn new(header: &[&str]) -> Table {
        Table { header: header.iter().map(|s| s.to_string()).collect(), rows: Vec::new(), left: Vec::new() }
    }
    pub fn left(mut self, col: usize) -> Table {
        self.left.push(col);
        self
    }
    pub fn row(&mut self, cells: Vec<String>) {
        self.rows.push(cells);
    }
    pub fn render(&self) -> String {
        let n = self.header.len();
        let mut w = vec![0usize; n];
        for r in std::iter::once(&self.header).chain(&self.rows) {
            for (i, c) in r.iter().enumerate().take(n) {
                w[i] = w[i].max(c.chars().count());
            }
        }
        let mut out = String::new();
        for r in std::iter::once(&self.header).chain(&self.rows) {
            let mut line = String::new();
            for (i, c) in r.iter().enumerate().take(n) {
                let pad = w[i] - c.chars().count();
                if i > 0 {
                    line.push_str("  ");
                }
                if self.left.contains(&i) {
                    line.push_str(c);
                    if i + 1 < n {
                        line.push_str(&" ".repeat(pad));
                    }
                } else {
                    line.push_str(&" ".repeat(pad));
                    line.push_str(c);
                }
            }
            out.push_str(line.trim_end());
            out.push('\n');
        }
        out
    }
}

/// Shorten long (C++) names for tables.
pub fn short(name: &str, max: usize) -> String {
    if name.chars().count() <= max {
        name.to_string()
    } else {
        let s: String = name.chars().take(max.saturating_sub(3)).collect();
        format!("{s}...")
    }
}
