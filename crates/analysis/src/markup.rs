//! Escaping for HTML and XML text, shared by every writer that produces markup (the HTML
//! report, SVG flame graphs, the CLI's empty report).

/// `s` with the five characters special in HTML and XML (`&`, `<`, `>`, `"`, `'`) escaped, so
/// it is safe in text and in attribute values quoted either way.
pub fn escape(s: &str) -> String {
    let mut out = String::with_capacity(s.len());
    for c in s.chars() {
        match c {
            '&' => out.push_str("&amp;"),
            '<' => out.push_str("&lt;"),
            '>' => out.push_str("&gt;"),
            '"' => out.push_str("&quot;"),
            '\'' => out.push_str("&#39;"),
            c => out.push(c),
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn escaping() {
        assert_eq!(escape("<a href=\"x\">&'</a>"), "&lt;a href=&quot;x&quot;&gt;&amp;&#39;&lt;/a&gt;");
    }
}
