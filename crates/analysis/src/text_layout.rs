//! Column widths and indentation for the plain-text writers, bounded so that no input — a
//! 70,000-character name, a 40,000-deep request — can make a line huge or overflow `std::fmt`'s
//! width limit (65,535).

use std::fmt;

/// The widest a text column is padded to; a longer value overflows its column on its own row.
pub(crate) const MAX_COLUMN_WIDTH: usize = 120;

/// Nesting levels shown as indentation; deeper lines stay at this indentation and say their
/// depth.
pub(crate) const MAX_INDENT_LEVELS: usize = 64;

/// The width of a column whose widest value is `widest` characters, at least `min`.
pub(crate) fn column_width(widest: usize, min: usize) -> usize {
    widest.max(min).min(MAX_COLUMN_WIDTH)
}

/// The indentation of a line at nesting depth `depth`: two spaces a level, up to
/// [`MAX_INDENT_LEVELS`]; deeper, that indentation followed by `… (depth D) `.
#[derive(Clone, Copy, Debug)]
pub(crate) struct Indent(pub(crate) usize);

impl fmt::Display for Indent {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        const SPACES: &str = "                                                                ";
        let mut left = 2 * self.0.min(MAX_INDENT_LEVELS);
        while left > 0 {
            let n = left.min(SPACES.len());
            f.write_str(&SPACES[..n])?;
            left -= n;
        }
        if self.0 > MAX_INDENT_LEVELS {
            write!(f, "… (depth {}) ", self.0)?;
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn widths_and_indents_are_bounded() {
        assert_eq!(column_width(3, 5), 5);
        assert_eq!(column_width(70_000, 5), MAX_COLUMN_WIDTH);
        assert_eq!(Indent(0).to_string(), "");
        assert_eq!(Indent(2).to_string(), "    ");
        assert_eq!(Indent(MAX_INDENT_LEVELS).to_string().len(), 2 * MAX_INDENT_LEVELS);
        let deep = Indent(40_000).to_string();
        assert!(deep.ends_with("… (depth 40000) ") && deep.len() < 2 * MAX_INDENT_LEVELS + 20);
    }
}
