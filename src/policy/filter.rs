//! Row filters: a small expression language over a table's columns and literals
//! (docs/privacy.md, Row filters), parsed once, checked against the table's columns,
//! evaluated on row images and rendered as SQL for the engine that filters at the source.
//!
//! The language: comparisons (`=`, `<>` or `!=`, `<`, `<=`, `>`, `>=`) between columns and
//! literals, `[NOT] IN (literal, …)`, `IS [NOT] NULL`, `AND`, `OR`, `NOT` and parentheses.
//! Columns are bare identifiers or `"quoted"`; literals are `'text'` (`''` for a quote),
//! numbers, `TRUE` and `FALSE`. Keywords are case-insensitive.
//!
//! Guarantees: evaluation is SQL's three-valued logic — a comparison with NULL is unknown,
//! and a row is captured only when the filter is true; text compares byte for byte (no
//! collation: `'a' <> 'A'`), numbers exactly (integers and decimals as decimals, floats as
//! floats), dates, times and timestamps by value (a literal for an instant is UTC). A
//! filter that names an unknown column, compares a column with a literal of another kind,
//! or filters a list, JSON or decimal wider than 38 digits is refused before any row is
//! read. [`Compiled::pushdown`] renders only what the source evaluates as sluice does or
//! more loosely, so a pushed filter never loses a row sluice would capture.

use std::cmp::Ordering;

use crate::change::{ColumnType, TableSchema, Value};
use crate::error::{Code, Error, Result};

/// A parsed filter, not yet checked against a table.
#[derive(Debug, Clone, PartialEq)]
pub enum Expr {
    And(Box<Expr>, Box<Expr>),
    Or(Box<Expr>, Box<Expr>),
    Not(Box<Expr>),
    Compare(Operand, CmpOp, Operand),
    In {
        operand: Operand,
        list: Vec<Literal>,
        negated: bool,
    },
    IsNull {
        operand: Operand,
        negated: bool,
    },
}

/// A column or a literal.
#[derive(Debug, Clone, PartialEq)]
pub enum Operand {
    Column(String),
    Literal(Literal),
}

/// A literal as written.
#[derive(Debug, Clone, PartialEq)]
pub enum Literal {
    Text(String),
    /// A number's text (`-12.50`, `1e3`).
    Number(String),
    Bool(bool),
}

/// A comparison operator.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum CmpOp {
    Eq,
    Ne,
    Lt,
    Le,
    Gt,
    Ge,
}

impl CmpOp {
    fn sql(self) -> &'static str {
        match self {
            CmpOp::Eq => "=",
            CmpOp::Ne => "<>",
            CmpOp::Lt => "<",
            CmpOp::Le => "<=",
            CmpOp::Gt => ">",
            CmpOp::Ge => ">=",
        }
    }

    fn holds(self, ord: Ordering) -> bool {
        match self {
            CmpOp::Eq => ord == Ordering::Equal,
            CmpOp::Ne => ord != Ordering::Equal,
            CmpOp::Lt => ord == Ordering::Less,
            CmpOp::Le => ord != Ordering::Greater,
            CmpOp::Gt => ord == Ordering::Greater,
            CmpOp::Ge => ord != Ordering::Less,
        }
    }

    /// The operator with its operands swapped (`a < b` is `b > a`).
    fn flipped(self) -> CmpOp {
        match self {
            CmpOp::Lt => CmpOp::Gt,
            CmpOp::Le => CmpOp::Ge,
            CmpOp::Gt => CmpOp::Lt,
            CmpOp::Ge => CmpOp::Le,
            other => other,
        }
    }
}

fn syntax(text: &str, why: impl std::fmt::Display) -> Error {
    Error::new(
        Code::ConfigPolicy,
        format!("filter {text:?}: {why}"),
    )
    .hint("a filter is comparisons (=, <>, <, <=, >, >=), IN (…), IS [NOT] NULL over columns and 'text', number, TRUE or FALSE literals, joined by AND, OR, NOT and parentheses (docs/privacy.md)")
}

#[derive(Debug, Clone, PartialEq)]
enum Token {
    Ident(String),
    Quoted(String),
    Text(String),
    Number(String),
    Op(CmpOp),
    LParen,
    RParen,
    Comma,
}

fn tokens(text: &str) -> Result<Vec<Token>> {
    let chars: Vec<char> = text.chars().collect();
    let mut out = Vec::new();
    let mut i = 0;
    while i < chars.len() {
        let c = chars[i];
        match c {
            c if c.is_whitespace() => i += 1,
            '(' => {
                out.push(Token::LParen);
                i += 1;
            }
            ')' => {
                out.push(Token::RParen);
                i += 1;
            }
            ',' => {
                out.push(Token::Comma);
                i += 1;
            }
            '\'' | '"' | '`' => {
                let close = if c == '`' { '`' } else { c };
                let mut s = String::new();
                i += 1;
                loop {
                    match chars.get(i) {
                        None => return Err(syntax(text, format!("unterminated {c}…{close}"))),
                        Some(&ch) if ch == close => {
                            if chars.get(i + 1) == Some(&close) {
                                s.push(close);
                                i += 2;
                            } else {
                                i += 1;
                                break;
                            }
                        }
                        Some(&ch) => {
                            s.push(ch);
                            i += 1;
                        }
                    }
                }
                out.push(if c == '\'' {
                    Token::Text(s)
                } else {
                    Token::Quoted(s)
                });
            }
            '=' => {
                out.push(Token::Op(CmpOp::Eq));
                i += 1;
            }
            '!' if chars.get(i + 1) == Some(&'=') => {
                out.push(Token::Op(CmpOp::Ne));
                i += 2;
            }
            '<' => match chars.get(i + 1) {
                Some('=') => {
                    out.push(Token::Op(CmpOp::Le));
                    i += 2;
                }
                Some('>') => {
                    out.push(Token::Op(CmpOp::Ne));
                    i += 2;
                }
                _ => {
                    out.push(Token::Op(CmpOp::Lt));
                    i += 1;
                }
            },
            '>' => {
                if chars.get(i + 1) == Some(&'=') {
                    out.push(Token::Op(CmpOp::Ge));
                    i += 2;
                } else {
                    out.push(Token::Op(CmpOp::Gt));
                    i += 1;
                }
            }
            c if c.is_ascii_digit()
                || ((c == '-' || c == '+' || c == '.')
                    && chars
                        .get(i + 1)
                        .is_some_and(|n| n.is_ascii_digit() || *n == '.')) =>
            {
                let start = i;
                i += 1;
                while let Some(&n) = chars.get(i) {
                    let exponent_sign = (n == '-' || n == '+') && matches!(chars[i - 1], 'e' | 'E');
                    if n.is_ascii_digit() || n == '.' || n == 'e' || n == 'E' || exponent_sign {
                        i += 1;
                    } else {
                        break;
                    }
                }
                let number: String = chars[start..i].iter().collect();
                if number.parse::<f64>().is_err() {
                    return Err(syntax(text, format!("{number:?} is not a number")));
                }
                out.push(Token::Number(number));
            }
            c if c.is_alphabetic() || c == '_' => {
                let start = i;
                while chars
                    .get(i)
                    .is_some_and(|n| n.is_alphanumeric() || *n == '_' || *n == '$')
                {
                    i += 1;
                }
                out.push(Token::Ident(chars[start..i].iter().collect()));
            }
            other => return Err(syntax(text, format!("unexpected {other:?}"))),
        }
    }
    Ok(out)
}

struct Parser<'a> {
    text: &'a str,
    tokens: Vec<Token>,
    at: usize,
}

impl Parser<'_> {
    fn peek(&self) -> Option<&Token> {
        self.tokens.get(self.at)
    }

    fn keyword(&self, word: &str) -> bool {
        matches!(self.peek(), Some(Token::Ident(w)) if w.eq_ignore_ascii_case(word))
    }

    fn eat_keyword(&mut self, word: &str) -> bool {
        let found = self.keyword(word);
        if found {
            self.at += 1;
        }
        found
    }

    fn expect(&mut self, token: &Token, what: &str) -> Result<()> {
        if self.peek() == Some(token) {
            self.at += 1;
            Ok(())
        } else {
            Err(syntax(self.text, format!("expected {what}")))
        }
    }

    fn or(&mut self) -> Result<Expr> {
        let mut left = self.and()?;
        while self.eat_keyword("OR") {
            left = Expr::Or(Box::new(left), Box::new(self.and()?));
        }
        Ok(left)
    }

    fn and(&mut self) -> Result<Expr> {
        let mut left = self.not()?;
        while self.eat_keyword("AND") {
            left = Expr::And(Box::new(left), Box::new(self.not()?));
        }
        Ok(left)
    }

    fn not(&mut self) -> Result<Expr> {
        if self.eat_keyword("NOT") {
            return Ok(Expr::Not(Box::new(self.not()?)));
        }
        self.primary()
    }

    fn primary(&mut self) -> Result<Expr> {
        if self.peek() == Some(&Token::LParen) {
            self.at += 1;
            let inner = self.or()?;
            self.expect(&Token::RParen, "`)`")?;
            return Ok(inner);
        }
        let operand = self.operand()?;
        if self.eat_keyword("IS") {
            let negated = self.eat_keyword("NOT");
            if !self.eat_keyword("NULL") {
                return Err(syntax(self.text, "expected NULL after IS [NOT]"));
            }
            return Ok(Expr::IsNull { operand, negated });
        }
        let negated = self.eat_keyword("NOT");
        if self.eat_keyword("IN") {
            self.expect(&Token::LParen, "`(` after IN")?;
            let mut list = Vec::new();
            loop {
                match self.operand()? {
                    Operand::Literal(l) => list.push(l),
                    Operand::Column(c) => {
                        return Err(syntax(
                            self.text,
                            format!("IN lists literals only, not the column {c}"),
                        ));
                    }
                }
                if self.peek() == Some(&Token::Comma) {
                    self.at += 1;
                    continue;
                }
                self.expect(&Token::RParen, "`,` or `)` in the IN list")?;
                break;
            }
            return Ok(Expr::In {
                operand,
                list,
                negated,
            });
        }
        if negated {
            return Err(syntax(self.text, "expected IN after NOT"));
        }
        match self.peek().cloned() {
            Some(Token::Op(op)) => {
                self.at += 1;
                let right = self.operand()?;
                Ok(Expr::Compare(operand, op, right))
            }
            _ => Err(syntax(
                self.text,
                "expected a comparison, IN or IS [NOT] NULL",
            )),
        }
    }

    fn operand(&mut self) -> Result<Operand> {
        let token = self
            .peek()
            .cloned()
            .ok_or_else(|| syntax(self.text, "ends too early"))?;
        self.at += 1;
        Ok(match token {
            Token::Text(s) => Operand::Literal(Literal::Text(s)),
            Token::Number(n) => Operand::Literal(Literal::Number(n)),
            Token::Quoted(name) => Operand::Column(name),
            Token::Ident(w) if w.eq_ignore_ascii_case("TRUE") => {
                Operand::Literal(Literal::Bool(true))
            }
            Token::Ident(w) if w.eq_ignore_ascii_case("FALSE") => {
                Operand::Literal(Literal::Bool(false))
            }
            Token::Ident(w) if w.eq_ignore_ascii_case("NULL") => {
                return Err(syntax(
                    self.text,
                    "compare with NULL through IS NULL / IS NOT NULL (a comparison with NULL is never true)",
                ));
            }
            Token::Ident(w)
                if ["AND", "OR", "NOT", "IN", "IS"]
                    .iter()
                    .any(|k| w.eq_ignore_ascii_case(k)) =>
            {
                return Err(syntax(self.text, format!("unexpected {w}")));
            }
            Token::Ident(name) => Operand::Column(name),
            other => return Err(syntax(self.text, format!("unexpected {other:?}"))),
        })
    }
}

/// Parses a filter's text.
pub fn parse(text: &str) -> Result<Expr> {
    let mut parser = Parser {
        text,
        tokens: tokens(text)?,
        at: 0,
    };
    if parser.tokens.is_empty() {
        return Err(syntax(text, "is empty"));
    }
    let expr = parser.or()?;
    if parser.at != parser.tokens.len() {
        return Err(syntax(
            text,
            format!("unexpected {:?}", parser.tokens[parser.at]),
        ));
    }
    Ok(expr)
}

impl Expr {
    /// Every column the filter names, in order of appearance.
    pub fn columns(&self) -> Vec<&str> {
        let mut out = Vec::new();
        self.visit_columns(&mut out);
        out
    }

    fn visit_columns<'a>(&'a self, out: &mut Vec<&'a str>) {
        let mut push = |o: &'a Operand| {
            if let Operand::Column(c) = o
                && !out.contains(&c.as_str())
            {
                out.push(c);
            }
        };
        match self {
            Expr::And(a, b) | Expr::Or(a, b) => {
                a.visit_columns(out);
                b.visit_columns(out);
            }
            Expr::Not(a) => a.visit_columns(out),
            Expr::Compare(l, _, r) => {
                push(l);
                push(r);
            }
            Expr::In { operand, .. } | Expr::IsNull { operand, .. } => push(operand),
        }
    }
}

/// A comparable cell: what a column's value and a literal compared with it become.
#[derive(Debug, Clone, PartialEq)]
enum Scalar {
    /// An exact number: unscaled digits and a scale.
    Exact(i128, u32),
    Float(f64),
    Text(String),
    Bytes(Vec<u8>),
    Bool(bool),
    /// Days since 1970-01-01.
    Date(i64),
    /// Microseconds since midnight.
    Time(i64),
    /// Microseconds since 1970-01-01 00:00:00 (UTC for an instant).
    Timestamp(i64),
}

/// How a column's values compare.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Kind {
    Exact { scale: u32 },
    Float,
    Text,
    Uuid,
    Bytes,
    Bool,
    Date,
    Time,
    Timestamp,
}

fn kind_of(ty: &ColumnType) -> Option<Kind> {
    use ColumnType::*;
    Some(match ty {
        Int8 | Int16 | Int32 | Int64 | UInt8 | UInt16 | UInt32 | UInt64 => Kind::Exact { scale: 0 },
        Decimal { precision, scale } if *precision <= 38 => Kind::Exact {
            scale: u32::from((*scale).max(0) as u8),
        },
        Float32 | Float64 => Kind::Float,
        Utf8 => Kind::Text,
        Uuid => Kind::Uuid,
        Binary => Kind::Bytes,
        Boolean => Kind::Bool,
        Date => Kind::Date,
        Time => Kind::Time,
        Timestamp | TimestampTz => Kind::Timestamp,
        Decimal { .. } | Json | List(_) => return None,
    })
}

/// A checked operand: a column (its index and kind) or a literal converted to the kind
/// of the column it is compared with.
#[derive(Debug, Clone, PartialEq)]
enum Term {
    Column { index: usize, kind: Kind },
    Constant(Scalar),
}

#[derive(Debug, Clone, PartialEq)]
enum Node {
    And(Box<Node>, Box<Node>),
    Or(Box<Node>, Box<Node>),
    Not(Box<Node>),
    Compare(Term, CmpOp, Term),
    In {
        term: Term,
        list: Vec<Scalar>,
        negated: bool,
    },
    IsNull {
        term: Term,
        negated: bool,
    },
}

/// A filter checked against one table shape: ready to evaluate and to render.
#[derive(Debug, Clone, PartialEq)]
pub struct Compiled {
    root: Node,
    /// The source's column names, by index (for rendering).
    names: Vec<String>,
    types: Vec<ColumnType>,
}

/// What a filter says of a row.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Verdict {
    /// The filter is true: the row is captured.
    In,
    /// False or unknown: the row is not captured.
    Out,
    /// It depends on a value the source did not log.
    Unknown,
}

fn policy_error(table: &str, text: &str, why: impl std::fmt::Display) -> Error {
    Error::new(
        Code::ConfigPolicy,
        format!("policy.tables.{table}.filter {text:?}: {why}"),
    )
    .hint("name the table's columns as the source names them, and compare each with a literal of its kind ('text' for text, dates and times, numbers for numbers, TRUE/FALSE for booleans)")
}

/// Checks `expr` (whose text is `text`) against `schema`.
pub fn compile(expr: &Expr, text: &str, schema: &TableSchema) -> Result<Compiled> {
    let table = &schema.name;
    let column = |name: &str| -> Result<(usize, Kind)> {
        let index = schema
            .index_of(name)
            .ok_or_else(|| policy_error(table, text, format!("{table} has no column {name:?}")))?;
        let ty = &schema.columns[index].ty;
        let kind = kind_of(ty).ok_or_else(|| {
            policy_error(
                table,
                text,
                format!("column {name} ({ty:?}) cannot be filtered on"),
            )
        })?;
        Ok((index, kind))
    };
    let literal = |lit: &Literal, kind: Kind, name: &str| -> Result<Scalar> {
        scalar_of(lit, kind).ok_or_else(|| {
            policy_error(
                table,
                text,
                format!("{lit:?} is not a value of column {name} ({kind:?})"),
            )
        })
    };
    fn build(
        expr: &Expr,
        column: &dyn Fn(&str) -> Result<(usize, Kind)>,
        literal: &dyn Fn(&Literal, Kind, &str) -> Result<Scalar>,
        fail: &dyn Fn(&str) -> Error,
    ) -> Result<Node> {
        let sub = |e: &Expr| build(e, column, literal, fail).map(Box::new);
        Ok(match expr {
            Expr::And(a, b) => Node::And(sub(a)?, sub(b)?),
            Expr::Or(a, b) => Node::Or(sub(a)?, sub(b)?),
            Expr::Not(a) => Node::Not(sub(a)?),
            Expr::Compare(left, op, right) => match (left, right) {
                (Operand::Column(a), Operand::Column(b)) => {
                    let (ia, ka) = column(a)?;
                    let (ib, kb) = column(b)?;
                    let comparable =
                        ka == kb || matches!((ka, kb), (Kind::Exact { .. }, Kind::Exact { .. }));
                    if !comparable {
                        return Err(fail(&format!(
                            "columns {a} and {b} hold values of different kinds"
                        )));
                    }
                    Node::Compare(
                        Term::Column {
                            index: ia,
                            kind: ka,
                        },
                        *op,
                        Term::Column {
                            index: ib,
                            kind: kb,
                        },
                    )
                }
                (Operand::Column(c), Operand::Literal(l)) => {
                    let (index, kind) = column(c)?;
                    Node::Compare(
                        Term::Column { index, kind },
                        *op,
                        Term::Constant(literal(l, kind, c)?),
                    )
                }
                (Operand::Literal(l), Operand::Column(c)) => {
                    let (index, kind) = column(c)?;
                    Node::Compare(
                        Term::Column { index, kind },
                        op.flipped(),
                        Term::Constant(literal(l, kind, c)?),
                    )
                }
                (Operand::Literal(_), Operand::Literal(_)) => {
                    return Err(fail("a comparison needs a column"));
                }
            },
            Expr::In {
                operand,
                list,
                negated,
            } => {
                let Operand::Column(c) = operand else {
                    return Err(fail("IN needs a column on its left"));
                };
                let (index, kind) = column(c)?;
                Node::In {
                    term: Term::Column { index, kind },
                    list: list
                        .iter()
                        .map(|l| literal(l, kind, c))
                        .collect::<Result<_>>()?,
                    negated: *negated,
                }
            }
            Expr::IsNull { operand, negated } => {
                let Operand::Column(c) = operand else {
                    return Err(fail("IS NULL needs a column"));
                };
                let (index, kind) = column(c)?;
                Node::IsNull {
                    term: Term::Column { index, kind },
                    negated: *negated,
                }
            }
        })
    }
    let fail = |why: &str| policy_error(table, text, why);
    let root = build(expr, &column, &literal, &fail)?;
    Ok(Compiled {
        root,
        names: schema.columns.iter().map(|c| c.name.clone()).collect(),
        types: schema.columns.iter().map(|c| c.ty.clone()).collect(),
    })
}

/// A literal as a value of `kind`, or `None` when it is not one.
fn scalar_of(lit: &Literal, kind: Kind) -> Option<Scalar> {
    Some(match (kind, lit) {
        (Kind::Exact { .. }, Literal::Number(n)) => match exact(n) {
            Some((digits, scale)) => Scalar::Exact(digits, scale),
            None => return None,
        },
        (Kind::Float, Literal::Number(n)) => Scalar::Float(n.parse().ok()?),
        (Kind::Text, Literal::Text(s)) => Scalar::Text(s.clone()),
        (Kind::Uuid, Literal::Text(s)) => Scalar::Text(s.to_ascii_lowercase()),
        (Kind::Bytes, Literal::Text(s)) => Scalar::Bytes(s.as_bytes().to_vec()),
        (Kind::Bool, Literal::Bool(b)) => Scalar::Bool(*b),
        (Kind::Date, Literal::Text(s)) => {
            let d = chrono::NaiveDate::parse_from_str(s.trim(), "%Y-%m-%d").ok()?;
            Scalar::Date(i64::from(d.num_days_from_ce()) - 719_163)
        }
        (Kind::Time, Literal::Text(s)) => {
            let t = chrono::NaiveTime::parse_from_str(s.trim(), "%H:%M:%S%.f").ok()?;
            use chrono::Timelike;
            Scalar::Time(
                i64::from(t.num_seconds_from_midnight()) * 1_000_000
                    + i64::from(t.nanosecond() / 1_000),
            )
        }
        (Kind::Timestamp, Literal::Text(s)) => Scalar::Timestamp(timestamp_micros(s)?),
        _ => return None,
    })
}

use chrono::Datelike;

/// `'2024-01-01'`, `'2024-01-01 12:00:00[.ffffff]'` (or with `T`), optionally ending in
/// `Z` or `+00:00` / `+00`; read as UTC.
fn timestamp_micros(text: &str) -> Option<i64> {
    let s = text.trim();
    let s = s
        .strip_suffix('Z')
        .or_else(|| s.strip_suffix("+00:00"))
        .or_else(|| s.strip_suffix("+00"))
        .unwrap_or(s)
        .replacen('T', " ", 1);
    let naive = chrono::NaiveDateTime::parse_from_str(&s, "%Y-%m-%d %H:%M:%S%.f")
        .ok()
        .or_else(|| {
            chrono::NaiveDate::parse_from_str(&s, "%Y-%m-%d")
                .ok()
                .and_then(|d| d.and_hms_opt(0, 0, 0))
        })?;
    Some(naive.and_utc().timestamp_micros())
}

/// A number literal as unscaled digits and a scale, when it is exact (no exponent).
fn exact(text: &str) -> Option<(i128, u32)> {
    if text.contains(['e', 'E']) {
        return None;
    }
    let (int, frac) = text.split_once('.').unwrap_or((text, ""));
    let digits: i128 = format!("{int}{frac}")
        .trim_start_matches('+')
        .parse()
        .ok()?;
    Some((digits, frac.len() as u32))
}

/// A cell as a scalar of `kind` (`None` for NULL).
fn scalar_value(value: &Value, kind: Kind) -> Option<Scalar> {
    Some(match (value, kind) {
        (Value::Null, _) => return None,
        (Value::Int(i), Kind::Exact { .. }) => Scalar::Exact(i128::from(*i), 0),
        (Value::UInt(u), Kind::Exact { .. }) => Scalar::Exact(i128::from(*u), 0),
        (Value::Decimal(d), Kind::Exact { scale }) => Scalar::Exact(*d, scale),
        (Value::Float(f), _) => Scalar::Float(*f),
        (Value::Text(s), _) => Scalar::Text(s.clone()),
        (Value::Bytes(b), _) => Scalar::Bytes(b.clone()),
        (Value::Boolean(b), _) => Scalar::Bool(*b),
        (Value::Date(d), _) => Scalar::Date(i64::from(*d)),
        (Value::Time(t), _) => Scalar::Time(*t),
        (Value::Timestamp(t), _) => Scalar::Timestamp(*t),
        _ => return None,
    })
}

fn compare(a: &Scalar, b: &Scalar) -> Option<Ordering> {
    match (a, b) {
        (Scalar::Exact(x, sx), Scalar::Exact(y, sy)) => {
            let scale = (*sx).max(*sy);
            let widen = |v: i128, s: u32| v.checked_mul(10i128.checked_pow(scale - s)?);
            match (widen(*x, *sx), widen(*y, *sy)) {
                (Some(x), Some(y)) => Some(x.cmp(&y)),
                // Past 38 digits: close enough is not exact; compare as the decimals
                // they are, through their text.
                _ => {
                    let f = |v: i128, s: u32| v as f64 / 10f64.powi(s as i32);
                    f(*x, *sx).partial_cmp(&f(*y, *sy))
                }
            }
        }
        (Scalar::Float(x), Scalar::Float(y)) => x.partial_cmp(y),
        (Scalar::Text(x), Scalar::Text(y)) => Some(x.as_bytes().cmp(y.as_bytes())),
        (Scalar::Bytes(x), Scalar::Bytes(y)) => Some(x.cmp(y)),
        (Scalar::Bool(x), Scalar::Bool(y)) => Some(x.cmp(y)),
        (Scalar::Date(x), Scalar::Date(y))
        | (Scalar::Time(x), Scalar::Time(y))
        | (Scalar::Timestamp(x), Scalar::Timestamp(y)) => Some(x.cmp(y)),
        _ => None,
    }
}

/// Three-valued truth, with "depends on an unlogged value".
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Truth {
    True,
    False,
    Null,
    Unlogged,
}

impl Truth {
    fn of(b: bool) -> Truth {
        if b { Truth::True } else { Truth::False }
    }
}

impl Compiled {
    /// What the filter says of `image` (positional over the schema it was compiled for),
    /// whose columns `unlogged` the source did not log.
    pub fn verdict(&self, image: &[Value], unlogged: &[usize]) -> Verdict {
        match self.eval(&self.root, image, unlogged) {
            Truth::True => Verdict::In,
            Truth::False | Truth::Null => Verdict::Out,
            Truth::Unlogged => Verdict::Unknown,
        }
    }

    fn term(&self, term: &Term, image: &[Value], unlogged: &[usize]) -> Result<Option<Scalar>, ()> {
        match term {
            Term::Constant(s) => Ok(Some(s.clone())),
            Term::Column { index, .. } if unlogged.contains(index) => Err(()),
            Term::Column { index, kind } => {
                Ok(image.get(*index).and_then(|v| scalar_value(v, *kind)))
            }
        }
    }

    fn eval(&self, node: &Node, image: &[Value], unlogged: &[usize]) -> Truth {
        match node {
            Node::And(a, b) => match (self.eval(a, image, unlogged), self.eval(b, image, unlogged))
            {
                (Truth::False, _) | (_, Truth::False) => Truth::False,
                (Truth::Unlogged, _) | (_, Truth::Unlogged) => Truth::Unlogged,
                (Truth::Null, _) | (_, Truth::Null) => Truth::Null,
                _ => Truth::True,
            },
            Node::Or(a, b) => {
                match (self.eval(a, image, unlogged), self.eval(b, image, unlogged)) {
                    (Truth::True, _) | (_, Truth::True) => Truth::True,
                    (Truth::Unlogged, _) | (_, Truth::Unlogged) => Truth::Unlogged,
                    (Truth::Null, _) | (_, Truth::Null) => Truth::Null,
                    _ => Truth::False,
                }
            }
            Node::Not(a) => match self.eval(a, image, unlogged) {
                Truth::True => Truth::False,
                Truth::False => Truth::True,
                other => other,
            },
            Node::Compare(l, op, r) => {
                match (self.term(l, image, unlogged), self.term(r, image, unlogged)) {
                    (Err(()), _) | (_, Err(())) => Truth::Unlogged,
                    (Ok(Some(a)), Ok(Some(b))) => match compare(&a, &b) {
                        Some(ord) => Truth::of(op.holds(ord)),
                        // NaN compares with nothing.
                        None => Truth::of(*op == CmpOp::Ne),
                    },
                    _ => Truth::Null,
                }
            }
            Node::In {
                term,
                list,
                negated,
            } => match self.term(term, image, unlogged) {
                Err(()) => Truth::Unlogged,
                Ok(None) => Truth::Null,
                Ok(Some(v)) => {
                    let found = list.iter().any(|l| compare(&v, l) == Some(Ordering::Equal));
                    Truth::of(found != *negated)
                }
            },
            Node::IsNull { term, negated } => match self.term(term, image, unlogged) {
                Err(()) => Truth::Unlogged,
                Ok(v) => Truth::of(v.is_none() != *negated),
            },
        }
    }

    /// The filter as a PostgreSQL boolean expression: what the publication's row filter
    /// and the baseline's `WHERE` hold, so both are the server's own evaluation.
    pub fn postgres(&self) -> String {
        self.render(&self.root, &Dialect::Postgres, false)
            .unwrap_or_default()
    }

    /// The part of the filter a MySQL / MariaDB `WHERE` can evaluate at least as loosely
    /// as sluice (every row sluice captures, perhaps more): the top-level conjuncts that
    /// hold only exact comparisons of numbers, dates and naive timestamps, NULL tests, and
    /// — outside any NOT — equality and IN of text (the server's collation may match more
    /// text than the bytes, never less). `None` when no conjunct qualifies; the rows are
    /// evaluated by sluice whatever is pushed.
    pub fn pushdown_mysql(&self) -> Option<String> {
        let mut conjuncts = Vec::new();
        fn collect<'a>(node: &'a Node, out: &mut Vec<&'a Node>) {
            match node {
                Node::And(a, b) => {
                    collect(a, out);
                    collect(b, out);
                }
                other => out.push(other),
            }
        }
        collect(&self.root, &mut conjuncts);
        let pushed: Vec<String> = conjuncts
            .into_iter()
            .filter_map(|n| self.render(n, &Dialect::MySql, false))
            .collect();
        (!pushed.is_empty()).then(|| pushed.join(" AND "))
    }

    /// Renders `node`; `None` when `dialect` cannot evaluate it at least as loosely as
    /// sluice (`negated`: the node is under a NOT, where looser is stricter).
    fn render(&self, node: &Node, dialect: &Dialect, negated: bool) -> Option<String> {
        Some(match node {
            Node::And(a, b) => format!(
                "({} AND {})",
                self.render(a, dialect, negated)?,
                self.render(b, dialect, negated)?
            ),
            Node::Or(a, b) => format!(
                "({} OR {})",
                self.render(a, dialect, negated)?,
                self.render(b, dialect, negated)?
            ),
            Node::Not(a) => format!("(NOT {})", self.render(a, dialect, !negated)?),
            Node::Compare(l, op, r) => {
                let loose_ok = *op == CmpOp::Eq && !negated;
                format!(
                    "({} {} {})",
                    self.term_sql(l, dialect, loose_ok)?,
                    op.sql(),
                    self.term_sql(r, dialect, loose_ok)?
                )
            }
            Node::In {
                term,
                list,
                negated: not_in,
            } => {
                let loose_ok = !not_in && !negated;
                let column = self.term_sql(term, dialect, loose_ok)?;
                let items = list
                    .iter()
                    .map(|s| literal_sql(s, dialect))
                    .collect::<Option<Vec<_>>>()?;
                format!(
                    "({column} {}IN ({}))",
                    if *not_in { "NOT " } else { "" },
                    items.join(", ")
                )
            }
            Node::IsNull {
                term,
                negated: not_null,
            } => format!(
                "({} IS {}NULL)",
                self.term_sql(term, dialect, true)?,
                if *not_null { "NOT " } else { "" }
            ),
        })
    }

    fn term_sql(&self, term: &Term, dialect: &Dialect, loose_ok: bool) -> Option<String> {
        match term {
            Term::Column { index, kind } => {
                let exact = match dialect {
                    Dialect::Postgres => true,
                    Dialect::MySql => match kind {
                        Kind::Exact { .. } | Kind::Bool | Kind::Date => true,
                        // DATETIME compares by value; TIMESTAMP through the session's
                        // time zone: only the naive one is pushed.
                        Kind::Timestamp => self.types[*index] == ColumnType::Timestamp,
                        Kind::Text | Kind::Uuid => false,
                        Kind::Float | Kind::Bytes | Kind::Time => return None,
                    },
                };
                if !exact && !loose_ok {
                    return None;
                }
                Some(dialect.quote(&self.names[*index]))
            }
            Term::Constant(s) => literal_sql(s, dialect),
        }
    }
}

enum Dialect {
    Postgres,
    MySql,
}

impl Dialect {
    fn quote(&self, name: &str) -> String {
        match self {
            Dialect::Postgres => format!("\"{}\"", name.replace('"', "\"\"")),
            Dialect::MySql => format!("`{}`", name.replace('`', "``")),
        }
    }

    fn text(&self, s: &str) -> String {
        match self {
            // A backslash makes it the escape form, whatever standard_conforming_strings.
            Dialect::Postgres if s.contains('\\') => {
                format!("E'{}'", s.replace('\\', "\\\\").replace('\'', "''"))
            }
            Dialect::Postgres => format!("'{}'", s.replace('\'', "''")),
            Dialect::MySql => format!("'{}'", s.replace('\\', "\\\\").replace('\'', "''")),
        }
    }
}

/// A literal as `dialect` writes it; dates, times and timestamps in their ISO forms (an
/// instant's with `+00` for PostgreSQL, which reads it as UTC whatever the session's
/// `TimeZone`, and ignores it for a naive timestamp).
fn literal_sql(s: &Scalar, dialect: &Dialect) -> Option<String> {
    use crate::policy::text::text_form;
    let form = |ty: ColumnType, v: Value| text_form(&ty, &v).map(|t| t.into_owned());
    Some(match s {
        Scalar::Exact(digits, scale) => form(
            ColumnType::Decimal {
                precision: 38,
                scale: *scale as i8,
            },
            Value::Decimal(*digits),
        )?,
        Scalar::Float(f) => format!("{f:?}"),
        Scalar::Text(t) => dialect.text(t),
        Scalar::Bytes(b) => match dialect {
            Dialect::Postgres => format!("'\\x{}'::bytea", crate::policy::text::hex(b)),
            Dialect::MySql => format!("X'{}'", crate::policy::text::hex(b)),
        },
        Scalar::Bool(b) => if *b { "TRUE" } else { "FALSE" }.to_owned(),
        Scalar::Date(d) => dialect.text(&form(ColumnType::Date, Value::Date(*d as i32))?),
        Scalar::Time(t) => dialect.text(&form(ColumnType::Time, Value::Time(*t))?),
        Scalar::Timestamp(t) => {
            let text = form(ColumnType::Timestamp, Value::Timestamp(*t))?.replacen('T', " ", 1);
            match dialect {
                Dialect::Postgres => dialect.text(&format!("{text}+00")),
                Dialect::MySql => dialect.text(&text),
            }
        }
    })
}
