//! The seeded, engine-neutral workload: a table spec of typed columns, random values with
//! their edge cases, and transactions of row operations generated against a model of the
//! table's keys — so every update, key change and delete hits a row that exists, and the
//! oracle knows exactly how many change events the source must report.

use std::collections::BTreeSet;

use super::rng::Rng;

/// What values a column holds; each engine maps these to its own SQL types and bounds.
#[derive(Debug, Clone, PartialEq)]
pub enum Kind {
    Int {
        min: i64,
        max: i64,
    },
    /// `numeric(precision, scale)` / `DECIMAL(p, s)`.
    Decimal {
        precision: u8,
        scale: u8,
    },
    /// Unconstrained numeric: every value keeps its own scale.
    FreeDecimal,
    Float32,
    Float64,
    /// Floats without NaN and the infinities (engines that cannot store them).
    FiniteFloat32,
    FiniteFloat64,
    Bool,
    /// Variable-length text of at most `max_chars` characters.
    Text {
        max_chars: usize,
    },
    /// Blank-padded `char(chars)`.
    FixedText {
        chars: usize,
    },
    /// Text that is sometimes large enough to be stored out of line (TOAST).
    LargeText,
    Bytes {
        max_len: usize,
    },
    /// Days from 1970-01-01.
    Date {
        min: i64,
        max: i64,
    },
    /// Microseconds since midnight, up to and including `max`.
    Time {
        max: i64,
    },
    /// Microseconds from 1970-01-01 (wall clock).
    Timestamp {
        min: i64,
        max: i64,
    },
    /// Microseconds from 1970-01-01 UTC; literals carry a random zone offset.
    TimestampTz {
        min: i64,
        max: i64,
    },
    Uuid,
    /// JSON text kept exactly as written.
    Json,
    /// JSON normalized by the server.
    Jsonb,
    List(Box<Kind>),
    /// One of these source literals, for a type sluice writes as the source's own text
    /// (PostgreSQL `interval`, `inet`, ranges; MariaDB `ENUM`, `INET6`): the replay must
    /// hold exactly what the source prints for it.
    Literal(&'static [&'static str]),
}

/// One non-key column of the captured table.
#[derive(Debug, Clone)]
pub struct Column {
    pub name: String,
    pub kind: Kind,
}

/// The captured table: a 64-bit integer key column and typed columns.
#[derive(Debug, Clone)]
pub struct TableSpec {
    pub name: String,
    pub key: String,
    pub columns: Vec<Column>,
}

impl TableSpec {
    /// The table `name` keyed by `id`, from `(column, source type, kind)` triples; also
    /// returns the source types in column order (for the engine's DDL).
    pub fn from_typed(
        name: &str,
        columns: Vec<(&str, &'static str, Kind)>,
    ) -> (TableSpec, Vec<&'static str>) {
        let types = columns.iter().map(|(_, ty, _)| *ty).collect();
        let spec = TableSpec {
            name: name.into(),
            key: "id".into(),
            columns: columns
                .into_iter()
                .map(|(name, _, kind)| Column {
                    name: name.into(),
                    kind,
                })
                .collect(),
        };
        (spec, types)
    }

    /// The table with only the columns `keep` accepts (the key stays).
    pub fn only(&self, keep: impl Fn(&Column) -> bool) -> TableSpec {
        TableSpec {
            name: self.name.clone(),
            key: self.key.clone(),
            columns: self.columns.iter().filter(|c| keep(c)).cloned().collect(),
        }
    }

    /// The source types of `subset`'s columns, from this table's `types` (column order).
    pub fn types_of(&self, types: &[&'static str], subset: &TableSpec) -> Vec<&'static str> {
        subset
            .columns
            .iter()
            .map(|c| {
                let i = self.columns.iter().position(|f| f.name == c.name);
                types[i.unwrap_or_else(|| panic!("column {} is not in {}", c.name, self.name))]
            })
            .collect()
    }
}

/// A generated value.
#[derive(Debug, Clone, PartialEq)]
pub enum Val {
    Null,
    Int(i64),
    /// Decimal text (`-12.3400`), already at the column's scale or free.
    Dec(String),
    F32(f32),
    F64(f64),
    Bool(bool),
    Text(String),
    Bytes(Vec<u8>),
    Date(i64),
    Time(i64),
    Ts(i64),
    /// An instant and the zone offset (minutes east of UTC) its literal is written in.
    TsTz {
        micros: i64,
        offset_min: i32,
    },
    Uuid([u8; 16]),
    Json(String),
    List(Vec<Val>),
    /// A source literal of a [`Kind::Literal`] column.
    Literal(&'static str),
}

/// One statement of a transaction.
#[derive(Debug, Clone)]
pub enum Stmt {
    /// A new row with every column (`values` is indexed like `TableSpec::columns`).
    Insert {
        id: i64,
        values: Vec<Val>,
    },
    /// Set some non-key columns of existing rows.
    Update {
        ids: Vec<i64>,
        set: Vec<(usize, Val)>,
    },
    /// Change a row's key (and maybe some columns).
    KeyChange {
        from: i64,
        to: i64,
        set: Vec<(usize, Val)>,
    },
    Delete {
        ids: Vec<i64>,
    },
    /// `count` rows with keys `first..first+count`, values computed by the engine from the
    /// key (a large transaction in one statement).
    BulkInsert {
        first: i64,
        count: i64,
    },
    /// Set one column of every row.
    UpdateAll {
        column: usize,
        value: Val,
    },
    /// Statements inside a savepoint that is rolled back: they must never appear.
    RolledBack(Vec<Stmt>),
    /// Empty the table (`TRUNCATE`): one change event, every row gone. Only generated for
    /// an engine that carries TRUNCATE ([`Workload::truncates`]).
    Truncate,
}

/// One transaction; `commit: false` ends in ROLLBACK (nothing of it may appear).
#[derive(Debug, Clone)]
pub struct Txn {
    pub stmts: Vec<Stmt>,
    pub commit: bool,
    /// Change events it makes if committed, by the model: every row a statement touches
    /// (PostgreSQL logs an UPDATE that sets identical values too), two per key change.
    pub changes: u64,
}

/// What the generator knows about the table: the keys that exist.
#[derive(Debug, Clone, Default)]
pub struct Model {
    pub keys: BTreeSet<i64>,
    next_key: i64,
}

impl Model {
    /// Change events (`__seq` rows) the statement produces; updates the model.
    fn apply(&mut self, stmt: &Stmt) -> u64 {
        match stmt {
            Stmt::Insert { id, .. } => {
                self.keys.insert(*id);
                1
            }
            Stmt::Update { ids, .. } => ids.len() as u64,
            Stmt::KeyChange { from, to, .. } => {
                self.keys.remove(from);
                self.keys.insert(*to);
                2
            }
            Stmt::Delete { ids } => {
                for id in ids {
                    self.keys.remove(id);
                }
                ids.len() as u64
            }
            Stmt::BulkInsert { first, count } => {
                self.keys.extend(*first..*first + *count);
                *count as u64
            }
            Stmt::UpdateAll { .. } => self.keys.len() as u64,
            Stmt::RolledBack(_) => 0,
            Stmt::Truncate => {
                self.keys.clear();
                1
            }
        }
    }

    fn fresh_key(&mut self, rng: &mut Rng) -> i64 {
        const EDGES: [i64; 5] = [i64::MIN, i64::MAX, 0, -1, i64::MIN + 1];
        if rng.chance(3) {
            let k = *rng.pick(&EDGES);
            if !self.keys.contains(&k) {
                return k;
            }
        }
        loop {
            self.next_key += rng.range(1, 3);
            if !self.keys.contains(&self.next_key) {
                return self.next_key;
            }
        }
    }

    fn existing(&self, rng: &mut Rng) -> Option<i64> {
        if self.keys.is_empty() {
            return None;
        }
        self.keys.iter().nth(rng.below(self.keys.len())).copied()
    }
}

/// Generates transactions for one table.
pub struct Workload<'a> {
    pub spec: &'a TableSpec,
    pub model: Model,
    /// Change events committed so far.
    pub expected_changes: u64,
    /// Upper bound for one bulk insert.
    pub max_bulk: i64,
    /// Whether transactions may TRUNCATE the table (an engine that carries it).
    pub truncates: bool,
    /// Whether a TRUNCATE comes as a transaction of its own (MariaDB: it commits
    /// implicitly, so it cannot share or be rolled back with other statements).
    pub truncates_alone: bool,
}

impl<'a> Workload<'a> {
    pub fn new(spec: &'a TableSpec, max_bulk: i64) -> Self {
        Workload {
            spec,
            model: Model {
                keys: BTreeSet::new(),
                next_key: 1000,
            },
            expected_changes: 0,
            max_bulk,
            truncates: false,
            truncates_alone: false,
        }
    }

    /// The next transaction; the model advances as if it was applied (and committed if
    /// `commit`), so the caller must apply it.
    pub fn next_txn(&mut self, rng: &mut Rng) -> Txn {
        if self.truncates_alone && !self.model.keys.is_empty() && rng.chance(4) {
            let changes = self.model.apply(&Stmt::Truncate);
            self.expected_changes += changes;
            return Txn {
                stmts: vec![Stmt::Truncate],
                commit: true,
                changes,
            };
        }
        let mut model = self.model.clone();
        let mut changes = 0;
        let mut stmts = Vec::new();
        if rng.chance(3) {
            let count = rng.range(self.max_bulk / 4, self.max_bulk).max(1);
            let first = model.next_key + 1;
            model.next_key += count + 1;
            let stmt = Stmt::BulkInsert { first, count };
            changes += model.apply(&stmt);
            stmts.push(stmt);
        }
        let n = if rng.chance(15) {
            rng.range(8, 30)
        } else {
            rng.range(1, 6)
        };
        for _ in 0..n {
            let stmt = self.stmt(&mut model, rng, true);
            changes += model.apply(&stmt);
            stmts.push(stmt);
        }
        let commit = !rng.chance(4);
        if commit {
            self.model = model;
            self.expected_changes += changes;
        } else {
            // The keys a rolled-back insert used stay unused: advance the counter anyway.
            self.model.next_key = model.next_key;
        }
        Txn {
            stmts,
            commit,
            changes: if commit { changes } else { 0 },
        }
    }

    fn stmt(&self, model: &mut Model, rng: &mut Rng, nest: bool) -> Stmt {
        let roll = rng.below(100);
        let existing = model.existing(rng);
        match (roll, existing) {
            (0..=4, _) if nest => {
                let mut inner = model.clone();
                let stmts = (0..rng.range(1, 3))
                    .map(|_| {
                        let s = self.stmt(&mut inner, rng, false);
                        inner.apply(&s);
                        s
                    })
                    .collect();
                model.next_key = inner.next_key;
                Stmt::RolledBack(stmts)
            }
            (5..=7, Some(_)) if model.keys.len() < 400 => {
                let column = rng.below(self.spec.columns.len());
                Stmt::UpdateAll {
                    column,
                    value: self.value(rng, column),
                }
            }
            (8..=37, Some(id)) => Stmt::Update {
                ids: {
                    let mut ids = vec![id];
                    if rng.chance(20) {
                        for _ in 0..rng.range(1, 4) {
                            if let Some(other) = model.existing(rng)
                                && !ids.contains(&other)
                            {
                                ids.push(other);
                            }
                        }
                    }
                    ids
                },
                set: self.some_columns(rng),
            },
            (38..=45, Some(from)) => {
                let to = model.fresh_key(rng);
                // Half of them leave every other column (a large value too) unchanged.
                let set = if rng.chance(50) {
                    self.some_columns(rng)
                } else {
                    vec![]
                };
                Stmt::KeyChange { from, to, set }
            }
            (46..=60, Some(id)) => Stmt::Delete { ids: vec![id] },
            (61..=62, Some(_)) if nest && self.truncates => Stmt::Truncate,
            _ => Stmt::Insert {
                id: model.fresh_key(rng),
                values: (0..self.spec.columns.len())
                    .map(|c| self.value(rng, c))
                    .collect(),
            },
        }
    }

    /// One to three distinct non-key columns with new values.
    fn some_columns(&self, rng: &mut Rng) -> Vec<(usize, Val)> {
        let mut chosen: Vec<usize> = Vec::new();
        for _ in 0..rng.range(1, 3) {
            let c = rng.below(self.spec.columns.len());
            if !chosen.contains(&c) {
                chosen.push(c);
            }
        }
        chosen
            .into_iter()
            .map(|c| (c, self.value(rng, c)))
            .collect()
    }

    /// A random value for column `c`: NULL sometimes, an edge value often.
    pub fn value(&self, rng: &mut Rng, c: usize) -> Val {
        if rng.chance(12) {
            return Val::Null;
        }
        value_of(&self.spec.columns[c].kind, rng)
    }
}

/// A random non-NULL value of `kind`.
pub fn value_of(kind: &Kind, rng: &mut Rng) -> Val {
    let edge = rng.chance(25);
    match kind {
        Kind::Literal(choices) => Val::Literal(choices[rng.below(choices.len())]),
        Kind::Int { min, max } => Val::Int(if edge {
            (*rng.pick(&[*min, *max, 0, -1, 1, min + 1, max - 1])).clamp(*min, *max)
        } else if rng.chance(50) && (*min).max(-1000) <= (*max).min(1000) {
            rng.range((*min).max(-1000), (*max).min(1000))
        } else {
            rng.range(*min, *max)
        }),
        Kind::Decimal { precision, scale } => {
            let int_digits = (*precision - *scale) as usize;
            let (int, frac) = if edge {
                match rng.below(4) {
                    0 => ("9".repeat(int_digits), "9".repeat(*scale as usize)),
                    1 => (
                        String::new(),
                        format!("{:0>width$}", "1", width = *scale as usize),
                    ),
                    2 => (String::new(), "0".repeat(*scale as usize)),
                    _ => ("1".into(), "0".repeat(*scale as usize)),
                }
            } else {
                let n = rng.below(int_digits + 1);
                (digits(rng, n), digits(rng, *scale as usize))
            };
            let int = if int.is_empty() {
                "0".to_owned()
            } else {
                int.trim_start_matches('0').to_owned()
            };
            let int = if int.is_empty() { "0".to_owned() } else { int };
            let sign = if rng.chance(40) { "-" } else { "" };
            Val::Dec(if frac.is_empty() {
                format!("{sign}{int}")
            } else {
                format!("{sign}{int}.{frac}")
            })
        }
        Kind::FreeDecimal => {
            let texts = [
                "0",
                "1.50000",
                "-0.000001",
                "123456789012345678901234567890.123",
                "100000000000000000000000000000000000000000000000000",
                "-7",
                "0.0",
                "3.14159265358979323846264338327950288419716939937510",
            ];
            if edge {
                Val::Dec((*rng.pick(&texts)).to_owned())
            } else {
                let (ni, nf) = (rng.below(25), rng.below(20));
                let int = digits(rng, ni);
                let frac = digits(rng, nf);
                let int = int.trim_start_matches('0');
                let int = if int.is_empty() { "0" } else { int };
                let sign = if rng.chance(40) { "-" } else { "" };
                Val::Dec(if frac.is_empty() {
                    format!("{sign}{int}")
                } else {
                    format!("{sign}{int}.{frac}")
                })
            }
        }
        Kind::FiniteFloat32 => match value_of(&Kind::Float32, rng) {
            Val::F32(v) if !v.is_finite() => Val::F32(f32::MAX),
            v => v,
        },
        Kind::FiniteFloat64 => match value_of(&Kind::Float64, rng) {
            Val::F64(v) if !v.is_finite() => Val::F64(f64::MIN_POSITIVE),
            v => v,
        },
        Kind::Float32 => Val::F32(if edge {
            *rng.pick(&[
                0.0,
                -0.0,
                1.5,
                f32::MAX,
                f32::MIN,
                f32::MIN_POSITIVE,
                1e-45,
                f32::INFINITY,
                f32::NEG_INFINITY,
                f32::NAN,
                0.1,
            ])
        } else {
            loop {
                let v = f32::from_bits(rng.next_u64() as u32);
                if v.is_finite() {
                    break v;
                }
            }
        }),
        Kind::Float64 => Val::F64(if edge {
            *rng.pick(&[
                0.0,
                -0.0,
                1.5,
                f64::MAX,
                f64::MIN,
                f64::MIN_POSITIVE,
                5e-324,
                f64::INFINITY,
                f64::NEG_INFINITY,
                f64::NAN,
                0.1,
                -2.25e100,
            ])
        } else {
            loop {
                let v = f64::from_bits(rng.next_u64());
                if v.is_finite() {
                    break v;
                }
            }
        }),
        Kind::Bool => Val::Bool(rng.chance(50)),
        Kind::Text { max_chars } => Val::Text(text(rng, *max_chars, edge)),
        Kind::FixedText { chars } => Val::Text(text(rng, *chars, edge).trim_end().to_owned()),
        Kind::LargeText => Val::Text(if rng.chance(40) {
            let n = rng.range(2500, 9000) as usize;
            // Not compressible, so it is stored out of line whatever the storage setting.
            (0..n)
                .map(|_| char::from(b'a' + (rng.next_u64() % 26) as u8))
                .collect()
        } else {
            text(rng, 40, edge)
        }),
        Kind::Bytes { max_len } => Val::Bytes(if edge {
            rng.pick(&[vec![], vec![0u8], vec![0xff, 0x00, 0x5c, 0x27]])
                .clone()
        } else {
            let n = rng.below(max_len + 1);
            rng.bytes(n)
        }),
        Kind::Date { min, max } => Val::Date(if edge {
            (*rng.pick(&[*min, *max, 0, -1, 10_957, -719_528])).clamp(*min, *max)
        } else {
            rng.range(-800_000, 800_000).clamp(*min, *max)
        }),
        Kind::Time { max } => Val::Time(if edge {
            *rng.pick(&[0, *max, 86_399_999_999, 1, 43_200_000_000])
        } else {
            rng.range(0, 86_399_999_999)
        }),
        Kind::Timestamp { min, max } => Val::Ts(timestamp(rng, *min, *max, edge)),
        Kind::TimestampTz { min, max } => {
            let micros = timestamp(rng, *min, *max, edge);
            // Edge instants are written in UTC: an offset could push the local wall time
            // out of the engine's range although the instant is in it.
            let offset_min = if edge {
                0
            } else {
                *rng.pick(&[0, 60, -480, 330, 825, -570])
            };
            Val::TsTz { micros, offset_min }
        }
        Kind::Uuid => {
            let b = rng.bytes(16);
            Val::Uuid(b.try_into().unwrap())
        }
        Kind::Json | Kind::Jsonb => Val::Json(
            (*rng.pick(&[
                r#"{"k": [1, 2.50, "x"]}"#,
                r#"  {"spaced" :  true , "dup": 1, "dup": 2}  "#,
                "[]",
                "null",
                r#""a string with \"quotes\" and \u00e9""#,
                r#"{"nested": {"deep": [null, {"z": -0.0}]}, "emoji": "🦀"}"#,
                "12345678901234567890.5",
            ]))
            .to_owned(),
        ),
        Kind::List(inner) => {
            let n = if edge { rng.below(2) } else { rng.below(5) };
            Val::List(
                (0..n)
                    .map(|_| {
                        if rng.chance(15) {
                            Val::Null
                        } else {
                            value_of(inner, rng)
                        }
                    })
                    .collect(),
            )
        }
    }
}

fn digits(rng: &mut Rng, n: usize) -> String {
    (0..n)
        .map(|_| char::from(b'0' + (rng.next_u64() % 10) as u8))
        .collect()
}

fn timestamp(rng: &mut Rng, min: i64, max: i64, edge: bool) -> i64 {
    if edge {
        (*rng.pick(&[min, max, 0, -1, 946_684_800_000_000, 951_782_400_000_001])).clamp(min, max)
    } else if rng.chance(70) && min.max(-2_208_988_800_000_000) <= max.min(4_102_444_800_000_000) {
        // 1900..2100 (within the engine's range), microsecond precision.
        rng.range(
            min.max(-2_208_988_800_000_000),
            max.min(4_102_444_800_000_000),
        )
    } else {
        rng.range(min, max)
    }
}

fn text(rng: &mut Rng, max_chars: usize, edge: bool) -> String {
    const PIECES: [&str; 14] = [
        "a",
        "Z",
        " ",
        "'",
        "\"",
        "\\",
        "\n",
        "\t",
        "é",
        "✓",
        "🦀",
        "ü\u{308}",
        "שָׁלוֹם",
        ",",
    ];
    if edge {
        let s = rng.pick::<&str>(&["", " ", "'", "\\", "NULL", "🦀🦀", "x\ny"]);
        return s.chars().take(max_chars).collect();
    }
    let mut out = String::new();
    let want = rng.below(max_chars.min(24) + 1);
    while out.chars().count() < want {
        out.push_str(rng.pick::<&str>(&PIECES));
    }
    out.chars().take(max_chars).collect()
}
