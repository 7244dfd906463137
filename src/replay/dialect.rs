//! The few places where DuckDB, Athena (Trino) and Spark SQL spell the replay query
//! differently: quoting, the array test, the regex test, and how a table folder becomes
//! rows with their file path. Everything else — the replay rule itself — is one text in
//! [`super::query`], shared by every dialect.
//!
//! Guarantees: an identifier is always quoted (so any column name is safe); a string
//! literal is produced only from text without `'` or `\` (refused earlier by
//! [`super::query::check_literal`]), so no dialect's escaping rules matter.

use std::fmt;
use std::str::FromStr;

/// A SQL dialect `sluice sql` renders for.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Dialect {
    /// DuckDB ≥ 1.0: reads the folder with `read_parquet`.
    DuckDb,
    /// Amazon Athena engine 3 (Trino): reads an external table over the folder.
    Athena,
    /// Spark SQL ≥ 4.1 (recursive CTEs): reads the folder through a temporary view.
    Spark,
}

impl Dialect {
    /// Every dialect, in the order the CLI lists them.
    pub const ALL: [Dialect; 3] = [Dialect::DuckDb, Dialect::Athena, Dialect::Spark];

    /// The name the CLI takes (`duckdb`, `athena`, `spark`).
    pub fn name(self) -> &'static str {
        match self {
            Dialect::DuckDb => "duckdb",
            Dialect::Athena => "athena",
            Dialect::Spark => "spark",
        }
    }

    /// `name` as a quoted identifier.
    pub fn ident(self, name: &str) -> String {
        match self {
            Dialect::Spark => format!("`{}`", name.replace('`', "``")),
            Dialect::DuckDb | Dialect::Athena => format!("\"{}\"", name.replace('"', "\"\"")),
        }
    }

    /// True when the list `array` holds the string literal `element` (NULL list: NULL).
    pub fn array_contains(self, array: &str, element: &str) -> String {
        match self {
            Dialect::DuckDb => format!("list_contains({array}, {element})"),
            Dialect::Athena => format!("contains({array}, {element})"),
            Dialect::Spark => format!("array_contains({array}, {element})"),
        }
    }

    /// True when `text` matches the regular expression literal `pattern` anywhere.
    pub fn regex_matches(self, text: &str, pattern: &str) -> String {
        match self {
            Dialect::DuckDb => format!("regexp_matches({text}, {pattern})"),
            Dialect::Athena => format!("regexp_like({text}, {pattern})"),
            Dialect::Spark => format!("({text} RLIKE {pattern})"),
        }
    }

    /// The clause after `FROM <relation>` that repeats each row `count` (≥ 1) times,
    /// numbering the copies `1..=count` in `column`.
    pub fn repeat_by(self, count: &str, column: &str) -> String {
        match self {
            Dialect::DuckDb => {
                format!("CROSS JOIN UNNEST(generate_series(1, {count})) AS __u({column})")
            }
            Dialect::Athena => format!("CROSS JOIN UNNEST(sequence(1, {count})) AS __u({column})"),
            Dialect::Spark => {
                format!("LATERAL VIEW explode(sequence(1, {count})) __u AS {column}")
            }
        }
    }

    /// The expression naming the file a row was read from, inside `FROM <rows>`.
    pub fn file_path(self) -> &'static str {
        match self {
            Dialect::DuckDb => "filename",
            Dialect::Athena => "\"$path\"",
            Dialect::Spark => "input_file_name()",
        }
    }
}

impl fmt::Display for Dialect {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

impl FromStr for Dialect {
    type Err = String;

    fn from_str(s: &str) -> Result<Self, Self::Err> {
        Dialect::ALL
            .into_iter()
            .find(|d| d.name() == s)
            .ok_or_else(|| format!("unknown dialect {s:?}: duckdb, athena or spark"))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_differences_are_these() {
        assert_eq!(Dialect::DuckDb.ident("a\"b"), "\"a\"\"b\"");
        assert_eq!(Dialect::Athena.ident("note"), "\"note\"");
        assert_eq!(Dialect::Spark.ident("a`b"), "`a``b`");
        assert_eq!(
            Dialect::DuckDb.array_contains("u", "'x'"),
            "list_contains(u, 'x')"
        );
        assert_eq!(
            Dialect::Athena.array_contains("u", "'x'"),
            "contains(u, 'x')"
        );
        assert_eq!(
            Dialect::Spark.array_contains("u", "'x'"),
            "array_contains(u, 'x')"
        );
        assert_eq!(
            Dialect::Athena.regex_matches("p", "'x'"),
            "regexp_like(p, 'x')"
        );
        assert_eq!(Dialect::Spark.regex_matches("p", "'x'"), "(p RLIKE 'x')");
        assert_eq!(Dialect::Athena.file_path(), "\"$path\"");
        for d in Dialect::ALL {
            assert_eq!(d.name().parse::<Dialect>(), Ok(d));
        }
        assert!("mysql".parse::<Dialect>().is_err());
    }
}
