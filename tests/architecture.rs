//! The import direction of `src/`, checked from the source text: the rooms (top-level
//! modules) form no cycle and neither do the files, only the job room and the faces
//! reach the drain, no engine (`src/source/**`) names the parts room, `config` names nothing
//! but core types, and one place writes checkpoints. Also the map: every room is on the
//! map of `docs/development.md` and of `src/lib.rs`, and every module opens with its
//! `//!` paragraph.
//!
//! What counts as an import: every path a `use` declaration names — its tree expanded, so
//! `use crate::{a, b::{c, d}}` names `a`, `b::c` and `b::d` — and every `crate::…`,
//! `super::…` and `self::…` path written in code; comments, doc comments, string
//! literals and `#[cfg(test)]` items are not code that ships, and test files are not
//! rooms. A path is followed to the file that defines what it names, through `pub use`
//! re-exports, so `crate::parts::FinishedPart` is an import of `parts/part.rs`, not of
//! `parts/mod.rs`. A parent naming its own child module without `self::` (`local::Local
//! Destination::new(…)` in `destination/mod.rs`) is the parent wiring its children, not
//! an import.

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};

/// Rooms allowed to import `drain`: the job room and the faces.
const DRAIN_CALLERS: &[&str] = &["job", "cli", "lambda"];
/// What `config` may import: core types with no I/O.
const CONFIG_MAY_IMPORT: &[&str] = &["error", "redact", "arn"];
/// The engines' folder and the room no engine may name (engines know only the stream
/// contract and the rooms below it).
const ENGINES: &str = "source/";
const NOT_FOR_ENGINES: &str = "parts";

fn src_dir() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("src")
}

fn rust_files(dir: &Path, out: &mut Vec<PathBuf>) {
    for entry in std::fs::read_dir(dir).expect("src is readable") {
        let path = entry.expect("a directory entry").path();
        if path.is_dir() {
            rust_files(&path, out);
        } else if path.extension().is_some_and(|e| e == "rs") {
            out.push(path);
        }
    }
}

/// Every file of `src/`: its path below `src/` (`/`-separated) and its text.
fn sources() -> Vec<(String, String)> {
    let src = src_dir();
    let mut files = Vec::new();
    rust_files(&src, &mut files);
    files
        .into_iter()
        .map(|file| {
            let relative = file.strip_prefix(&src).expect("under src");
            let relative = relative
                .components()
                .map(|c| c.as_os_str().to_str().expect("a UTF-8 path"))
                .collect::<Vec<_>>()
                .join("/");
            let text = std::fs::read_to_string(&file).expect("a readable source file");
            (relative, text)
        })
        .collect()
}

/// The room a file belongs to: its first path component under `src/`, without `.rs`
/// (`None` for the crate roots).
fn room_of(relative: &str) -> Option<String> {
    let first = relative.split('/').next()?;
    let room = first.strip_suffix(".rs").unwrap_or(first);
    (!matches!(room, "lib" | "main")).then(|| room.to_owned())
}

/// The module path of a file (`parts/part.rs` and `parts/part/mod.rs` → `[parts, part]`,
/// `lib.rs` → `[]`); `None` for `main.rs`, the binary's root.
fn module_of(relative: &str) -> Option<Vec<String>> {
    if relative == "main.rs" {
        return None;
    }
    if relative == "lib.rs" {
        return Some(Vec::new());
    }
    let stem = relative.strip_suffix(".rs")?;
    let mut path: Vec<String> = stem.split('/').map(str::to_owned).collect();
    if path.last().is_some_and(|last| last == "mod") {
        path.pop();
    }
    Some(path)
}

// ---------------------------------------------------------------------------------------
// Reading the code: comments, strings and test items out; use trees and paths in.

/// `text` with comments and the insides of string and character literals blanked
/// (newlines kept), so what is left is code.
fn code_only(text: &str) -> String {
    let chars: Vec<char> = text.chars().collect();
    let mut out = String::with_capacity(text.len());
    let blank = |c: char| if c == '\n' { '\n' } else { ' ' };
    let ident = |c: char| c.is_alphanumeric() || c == '_';
    let mut i = 0;
    while i < chars.len() {
        let c = chars[i];
        let next = chars.get(i + 1).copied();
        let after_ident = i > 0 && ident(chars[i - 1]);
        if c == '/' && next == Some('/') {
            while i < chars.len() && chars[i] != '\n' {
                out.push(' ');
                i += 1;
            }
        } else if c == '/' && next == Some('*') {
            let mut depth = 0;
            while i < chars.len() {
                if chars[i] == '/' && chars.get(i + 1) == Some(&'*') {
                    depth += 1;
                    out.push_str("  ");
                    i += 2;
                } else if chars[i] == '*' && chars.get(i + 1) == Some(&'/') {
                    depth -= 1;
                    out.push_str("  ");
                    i += 2;
                    if depth == 0 {
                        break;
                    }
                } else {
                    out.push(blank(chars[i]));
                    i += 1;
                }
            }
        } else if !after_ident && (c == 'r' || c == 'b') && raw_string_at(&chars, i).is_some() {
            let (open, hashes) = raw_string_at(&chars, i).expect("checked");
            for _ in 0..open {
                out.push(' ');
            }
            i += open;
            let close: Vec<char> = std::iter::once('"')
                .chain(std::iter::repeat_n('#', hashes))
                .collect();
            while i < chars.len() && !chars[i..].starts_with(&close) {
                out.push(blank(chars[i]));
                i += 1;
            }
            for _ in 0..close.len().min(chars.len() - i) {
                out.push(' ');
                i += 1;
            }
        } else if c == '"' || (c == 'b' && next == Some('"') && !after_ident) {
            if c == 'b' {
                out.push(' ');
                i += 1;
            }
            out.push(' ');
            i += 1;
            while i < chars.len() && chars[i] != '"' {
                if chars[i] == '\\' {
                    out.push(' ');
                    i += 1;
                }
                if i < chars.len() {
                    out.push(blank(chars[i]));
                    i += 1;
                }
            }
            out.push(' ');
            i += 1;
        } else if c == '\'' && char_literal_len(&chars, i).is_some() {
            let len = char_literal_len(&chars, i).expect("checked");
            for _ in 0..len {
                out.push(' ');
            }
            i += len;
        } else {
            out.push(c);
            i += 1;
        }
    }
    out
}

/// At a raw string (`r"`, `r#"`, `br##"` …): how many characters open it, and its `#`s.
fn raw_string_at(chars: &[char], at: usize) -> Option<(usize, usize)> {
    let mut i = at;
    if chars.get(i) == Some(&'b') {
        i += 1;
    }
    if chars.get(i) != Some(&'r') {
        return None;
    }
    i += 1;
    let mut hashes = 0;
    while chars.get(i) == Some(&'#') {
        hashes += 1;
        i += 1;
    }
    (chars.get(i) == Some(&'"')).then_some((i + 1 - at, hashes))
}

/// At `'`: the length of the character literal that starts there (`'a'`, `'\n'`,
/// `'\u{1F600}'`), `None` for a lifetime or a label.
fn char_literal_len(chars: &[char], at: usize) -> Option<usize> {
    match chars.get(at + 1)? {
        '\\' => {
            // The escaped character itself may be a quote (`'\''`).
            let close = chars
                .get(at + 3..)?
                .iter()
                .take(10)
                .position(|c| *c == '\'')?;
            Some(close + 4)
        }
        _ => (chars.get(at + 2) == Some(&'\'')).then_some(3),
    }
}

/// `code` (from [`code_only`]) without its `#[cfg(test)]` items: each runs from the
/// attribute to the first `;` outside brackets or the `}` closing its first `{`.
fn without_test_items(code: &str) -> String {
    let mut out = code.to_owned();
    let mut from = 0;
    while let Some(found) = out[from..].find("#[cfg(test)]") {
        let start = from + found;
        let bytes = out.as_bytes();
        let mut depth = 0usize;
        let mut end = out.len();
        for (i, b) in bytes.iter().enumerate().skip(start + "#[cfg(test)]".len()) {
            match b {
                b'{' | b'(' | b'[' => depth += 1,
                b'}' | b')' | b']' => {
                    depth = depth.saturating_sub(1);
                    if *b == b'}' && depth == 0 {
                        end = i + 1;
                        break;
                    }
                }
                b';' if depth == 0 => {
                    end = i + 1;
                    break;
                }
                _ => {}
            }
        }
        let blanked: String = out[start..end]
            .chars()
            .map(|c| if c == '\n' { '\n' } else { ' ' })
            .collect();
        out.replace_range(start..end, &blanked);
        from = end;
    }
    out
}

/// The child modules `code` declares `#[cfg(test)] mod name;` (files that only tests
/// compile).
fn test_modules(code: &str) -> BTreeSet<String> {
    let mut names = BTreeSet::new();
    for (at, _) in code.match_indices("#[cfg(test)]") {
        let rest = code[at + "#[cfg(test)]".len()..].trim_start();
        let rest = rest.strip_prefix("pub ").unwrap_or(rest).trim_start();
        if let Some(rest) = rest.strip_prefix("mod ") {
            let name: String = rest
                .trim_start()
                .chars()
                .take_while(|c| c.is_alphanumeric() || *c == '_')
                .collect();
            if rest.trim_start()[name.len()..]
                .trim_start()
                .starts_with(';')
            {
                names.insert(name);
            }
        }
    }
    names
}

/// One path a `use` declaration names, and the name it brings into scope (`None` for a
/// glob).
#[derive(Debug, Clone, PartialEq, Eq)]
struct UseLeaf {
    path: Vec<String>,
    name: Option<String>,
}

/// The use declarations of `code`: whether each is `pub` (a re-export), and its leaves.
fn use_declarations(code: &str) -> Vec<(bool, Vec<UseLeaf>)> {
    let mut found = Vec::new();
    let bytes = code.as_bytes();
    for (at, _) in code.match_indices("use ") {
        let before = code[..at].trim_end();
        let starts_item = before.is_empty()
            || before.ends_with([';', '{', '}', ']'])
            || before.ends_with("pub")
            || before.ends_with(')') && visibility_before(before);
        if at > 0 && (bytes[at - 1].is_ascii_alphanumeric() || bytes[at - 1] == b'_') {
            continue;
        }
        if !starts_item {
            continue;
        }
        let Some(end) = code[at..].find(';') else {
            continue;
        };
        let public = before.ends_with("pub") || before.ends_with(')') && visibility_before(before);
        let tree = &code[at + "use ".len()..at + end];
        let tokens = tokens(tree);
        let mut leaves = Vec::new();
        let mut pos = 0;
        parse_tree(&tokens, &mut pos, &[], &mut leaves);
        found.push((public, leaves));
    }
    found
}

/// True when `before` ends with a visibility such as `pub(crate)` or `pub(super)`.
fn visibility_before(before: &str) -> bool {
    let Some(open) = before.rfind('(') else {
        return false;
    };
    before[..open].trim_end().ends_with("pub")
}

/// The tokens of a use tree: identifiers, `::`, `{`, `}`, `,`, `*`.
fn tokens(tree: &str) -> Vec<String> {
    let mut tokens = Vec::new();
    let chars: Vec<char> = tree.chars().collect();
    let mut i = 0;
    while i < chars.len() {
        let c = chars[i];
        if c.is_whitespace() {
            i += 1;
        } else if c == ':' && chars.get(i + 1) == Some(&':') {
            tokens.push("::".to_owned());
            i += 2;
        } else if "{},*".contains(c) {
            tokens.push(c.to_string());
            i += 1;
        } else {
            let word: String = chars[i..]
                .iter()
                .take_while(|c| c.is_alphanumeric() || **c == '_')
                .collect();
            i += word.chars().count().max(1);
            if !word.is_empty() {
                tokens.push(word);
            }
        }
    }
    tokens
}

/// Parses one use tree at `tokens[*pos]` below `prefix`, appending its leaves.
fn parse_tree(tokens: &[String], pos: &mut usize, prefix: &[String], leaves: &mut Vec<UseLeaf>) {
    let mut path = prefix.to_vec();
    loop {
        match tokens.get(*pos).map(String::as_str) {
            Some("{") => {
                *pos += 1;
                while !matches!(tokens.get(*pos).map(String::as_str), Some("}") | None) {
                    parse_tree(tokens, pos, &path, leaves);
                    if tokens.get(*pos).map(String::as_str) == Some(",") {
                        *pos += 1;
                    }
                }
                *pos += 1;
                return;
            }
            Some("*") => {
                *pos += 1;
                leaves.push(UseLeaf { path, name: None });
                return;
            }
            Some("self") if path.len() > prefix.len() || !prefix.is_empty() => {
                // `{self, …}` names the prefix itself.
                *pos += 1;
                if tokens.get(*pos).map(String::as_str) == Some("::") {
                    path.push("self".to_owned());
                    *pos += 1;
                    continue;
                }
                let name = alias(tokens, pos).or_else(|| path.last().cloned());
                leaves.push(UseLeaf { path, name });
                return;
            }
            Some(word) if word != "," && word != "}" && word != "::" => {
                path.push(word.to_owned());
                *pos += 1;
                if tokens.get(*pos).map(String::as_str) == Some("::") {
                    *pos += 1;
                    continue;
                }
                let name = alias(tokens, pos).or_else(|| path.last().cloned());
                leaves.push(UseLeaf { path, name });
                return;
            }
            _ => return,
        }
    }
}

/// `as name` after a leaf, if there is one.
fn alias(tokens: &[String], pos: &mut usize) -> Option<String> {
    if tokens.get(*pos).map(String::as_str) == Some("as") {
        *pos += 2;
        return tokens.get(*pos - 1).cloned();
    }
    None
}

/// Every `crate::…`, `super::…` and `self::…` path written in `code` outside use
/// declarations (which [`use_declarations`] reads), as its segments.
fn inline_paths(code: &str) -> Vec<Vec<String>> {
    let mut code = code.to_owned();
    // Blank the use declarations: their trees are read whole, not piecewise.
    for start in code
        .match_indices("use ")
        .map(|(at, _)| at)
        .collect::<Vec<_>>()
    {
        let bytes = code.as_bytes();
        if start > 0 && (bytes[start - 1].is_ascii_alphanumeric() || bytes[start - 1] == b'_') {
            continue;
        }
        if let Some(end) = code[start..].find(';') {
            let blank = " ".repeat(end);
            code.replace_range(start..start + end, &blank);
        }
    }
    let chars: Vec<char> = code.chars().collect();
    let roots: Vec<Vec<char>> = ["crate::", "super::", "self::"]
        .iter()
        .map(|p| p.chars().collect())
        .collect();
    let mut paths = Vec::new();
    let mut i = 0;
    while i < chars.len() {
        let boundary = i == 0 || !(chars[i - 1].is_alphanumeric() || "_:$".contains(chars[i - 1]));
        let starts = roots.iter().any(|p| chars[i..].starts_with(p));
        if !(boundary && starts) {
            i += 1;
            continue;
        }
        let mut segments = Vec::new();
        loop {
            let word: String = chars[i..]
                .iter()
                .take_while(|c| c.is_alphanumeric() || **c == '_')
                .collect();
            if word.is_empty() {
                break;
            }
            i += word.chars().count();
            segments.push(word);
            if chars.get(i) == Some(&':') && chars.get(i + 1) == Some(&':') {
                i += 2;
            } else {
                break;
            }
        }
        paths.push(segments);
    }
    paths
}

// ---------------------------------------------------------------------------------------
// From paths to files.

/// The crate as the checks read it: each file's module, code and re-exports.
struct Crate {
    /// module path → file.
    modules: BTreeMap<Vec<String>, String>,
    /// file → its module path.
    module_of: BTreeMap<String, Vec<String>>,
    /// file → the paths it names.
    named: BTreeMap<String, Named>,
}

/// The paths one file names: its use declarations (each `pub` or not, with its leaves)
/// and the paths written in its code.
struct Named {
    uses: Vec<(bool, Vec<UseLeaf>)>,
    inline: Vec<Vec<String>>,
}

impl Crate {
    /// Reads `files` (path below `src/`, text); files only tests compile are left out.
    fn read(files: &[(String, String)]) -> Crate {
        let mut modules = BTreeMap::new();
        let mut codes = BTreeMap::new();
        let mut test_only: BTreeSet<Vec<String>> = BTreeSet::new();
        for (relative, text) in files {
            let Some(module) = module_of(relative) else {
                continue;
            };
            let code = code_only(text);
            for name in test_modules(&code) {
                let mut child = module.clone();
                child.push(name);
                test_only.insert(child);
            }
            modules.insert(module, relative.clone());
            codes.insert(relative.clone(), without_test_items(&code));
        }
        modules.retain(|module, _| !test_only.iter().any(|t| module.starts_with(t)));
        let module_of: BTreeMap<String, Vec<String>> = modules
            .iter()
            .map(|(module, file)| (file.clone(), module.clone()))
            .collect();
        let named = codes
            .into_iter()
            .filter(|(file, _)| module_of.contains_key(file))
            .map(|(file, code)| {
                let uses = use_declarations(&code);
                let inline = inline_paths(&code);
                (file, Named { uses, inline })
            })
            .collect();
        Crate {
            modules,
            module_of,
            named,
        }
    }

    /// `path` as written in `module` made absolute (from the crate root); `None` for a
    /// path into another crate. `in_use`: written in a use declaration, where a path may
    /// start at a child module of `module`.
    fn absolute(&self, module: &[String], path: &[String], in_use: bool) -> Option<Vec<String>> {
        let mut base = module.to_vec();
        let mut rest = path;
        match rest.first().map(String::as_str) {
            Some("crate") => {
                base.clear();
                rest = &rest[1..];
            }
            Some("self") => rest = &rest[1..],
            Some("super") => {
                while rest.first().map(String::as_str) == Some("super") {
                    base.pop()?;
                    rest = &rest[1..];
                }
            }
            Some(first) if in_use => {
                let mut child = module.to_vec();
                child.push(first.to_owned());
                if !self.modules.contains_key(&child) {
                    return None;
                }
            }
            _ => return None,
        }
        base.extend(rest.iter().filter(|s| *s != "self").cloned());
        Some(base)
    }

    /// The file defining what the absolute `path` names: its deepest module with a file,
    /// followed through that file's `pub use` of the next segment (at most `depth` more
    /// times).
    fn file_of(&self, path: &[String], depth: usize) -> Option<String> {
        let deepest = (0..=path.len())
            .rev()
            .find(|n| self.modules.contains_key(&path[..*n]))?;
        let module = &path[..deepest];
        let file = self.modules[module].clone();
        if let (Some(item), true) = (path.get(deepest), depth > 0) {
            for (public, leaves) in &self.named[&file].uses {
                let exported = leaves
                    .iter()
                    .filter(|_| *public)
                    .find(|leaf| leaf.name.as_deref() == Some(item.as_str()));
                if let Some(leaf) = exported
                    && let Some(mut target) = self.absolute(module, &leaf.path, true)
                {
                    target.extend(path[deepest + 1..].iter().cloned());
                    return self.file_of(&target, depth - 1);
                }
            }
        }
        Some(file)
    }

    /// Every absolute path `file` names.
    fn paths_of(&self, file: &str) -> Vec<Vec<String>> {
        let module = &self.module_of[file];
        let Named { uses, inline } = &self.named[file];
        let from_uses = uses
            .iter()
            .flat_map(|(_, leaves)| leaves)
            .filter_map(|leaf| self.absolute(module, &leaf.path, true));
        let from_code = inline
            .iter()
            .filter_map(|path| self.absolute(module, path, false));
        from_uses.chain(from_code).collect()
    }

    /// file → the other files it imports.
    fn file_graph(&self) -> Graph {
        let mut graph = Graph::new();
        for file in self.named.keys() {
            let entry = graph.entry(file.clone()).or_default();
            for path in self.paths_of(file) {
                if let Some(target) = self.file_of(&path, 8)
                    && target != *file
                {
                    entry.insert(target);
                }
            }
        }
        graph
    }
}

/// node → nodes it imports.
type Graph = BTreeMap<String, BTreeSet<String>>;
/// (importer, imported) → the files that make the arrow.
type Witnesses = BTreeMap<(String, String), BTreeSet<String>>;

/// room → rooms it names, and the files behind each arrow.
fn import_graph() -> (Graph, Witnesses) {
    let krate = Crate::read(&sources());
    let mut graph = Graph::new();
    let mut witnesses = Witnesses::new();
    for file in krate.named.keys() {
        let Some(room) = room_of(file) else {
            continue;
        };
        let entry = graph.entry(room.clone()).or_default();
        for path in krate.paths_of(file) {
            let Some(named) = path.first() else {
                continue;
            };
            if *named != room {
                entry.insert(named.clone());
                witnesses
                    .entry((room.clone(), named.clone()))
                    .or_default()
                    .insert(file.clone());
            }
        }
    }
    (graph, witnesses)
}

/// A cycle of the graph as a path `a → b → … → a`, if there is one.
fn find_cycle(graph: &Graph) -> Option<Vec<String>> {
    fn visit(
        node: &str,
        graph: &Graph,
        done: &mut BTreeSet<String>,
        path: &mut Vec<String>,
    ) -> Option<Vec<String>> {
        if let Some(at) = path.iter().position(|n| n == node) {
            let mut cycle = path[at..].to_vec();
            cycle.push(node.to_owned());
            return Some(cycle);
        }
        if done.contains(node) {
            return None;
        }
        path.push(node.to_owned());
        for next in graph.get(node).into_iter().flatten() {
            if let Some(cycle) = visit(next, graph, done, path) {
                return Some(cycle);
            }
        }
        path.pop();
        done.insert(node.to_owned());
        None
    }
    let mut done = BTreeSet::new();
    graph
        .keys()
        .find_map(|node| visit(node, graph, &mut done, &mut Vec::new()))
}

// ---------------------------------------------------------------------------------------
// The rules.

#[test]
fn the_rooms_form_no_import_cycle() {
    let (graph, witnesses) = import_graph();
    assert!(
        graph.len() > 20,
        "found only {} rooms under src/",
        graph.len()
    );
    if let Some(cycle) = find_cycle(&graph) {
        let steps: Vec<String> = cycle
            .windows(2)
            .map(|w| {
                let files = &witnesses[&(w[0].clone(), w[1].clone())];
                format!("{} → {} (in {files:?})", w[0], w[1])
            })
            .collect();
        panic!("import cycle among src/ rooms:\n  {}", steps.join("\n  "));
    }
}

#[test]
fn the_files_form_no_import_cycle() {
    let graph = Crate::read(&sources()).file_graph();
    assert!(
        graph.len() > 150,
        "found only {} files under src/",
        graph.len()
    );
    if let Some(cycle) = find_cycle(&graph) {
        panic!(
            "import cycle among src/ files (split what both need into a file below them):\n  {}",
            cycle.join(" → ")
        );
    }
}

#[test]
fn no_engine_imports_the_part_writers() {
    let krate = Crate::read(&sources());
    let offenders: Vec<String> = krate
        .named
        .keys()
        .filter(|file| file.starts_with(ENGINES))
        .filter(|file| {
            krate
                .paths_of(file)
                .iter()
                .any(|path| path.first().map(String::as_str) == Some(NOT_FOR_ENGINES))
        })
        .cloned()
        .collect();
    assert!(
        offenders.is_empty(),
        "engines import crate::{NOT_FOR_ENGINES}: {offenders:?} (budgets and spill files are crate::spill)"
    );
}

#[test]
fn only_the_job_room_and_the_faces_reach_the_drain() {
    let (graph, witnesses) = import_graph();
    for (room, named) in &graph {
        if named.contains("drain") && !DRAIN_CALLERS.contains(&room.as_str()) {
            panic!(
                "{room} imports drain (in {:?}); only {DRAIN_CALLERS:?} may",
                witnesses[&(room.clone(), "drain".to_owned())]
            );
        }
    }
}

#[test]
fn config_names_only_core_types() {
    let (graph, _) = import_graph();
    let named = &graph["config"];
    let above: Vec<&String> = named
        .iter()
        .filter(|n| !CONFIG_MAY_IMPORT.contains(&n.as_str()))
        .collect();
    assert!(
        above.is_empty(),
        "config imports {above:?}; it may import only {CONFIG_MAY_IMPORT:?}"
    );
}

#[test]
fn one_place_writes_checkpoints() {
    let mut callers = Vec::new();
    for (file, text) in sources() {
        if code_only(&text).contains(".advance_checkpoint(") {
            callers.push(file);
        }
    }
    assert_eq!(
        callers,
        ["commit.rs"],
        "checkpoint writes outside the committer"
    );
}

#[test]
fn every_room_is_on_the_map() {
    let sources = sources();
    let lib = &sources
        .iter()
        .find(|(file, _)| file == "lib.rs")
        .expect("lib.rs")
        .1;
    let rooms: Vec<&str> = lib
        .lines()
        .filter_map(|line| line.strip_prefix("pub mod")?.trim().strip_suffix(';'))
        .collect();
    assert!(rooms.len() > 20, "found only {rooms:?} in lib.rs");
    let lib_doc: String = lib
        .lines()
        .filter_map(|line| line.strip_prefix("//!"))
        .collect::<Vec<_>>()
        .join(" ");
    let guide =
        std::fs::read_to_string(Path::new(env!("CARGO_MANIFEST_DIR")).join("docs/development.md"))
            .expect("docs/development.md");
    let map = guide
        .split("## Map of the rooms")
        .nth(1)
        .expect("docs/development.md has a map of the rooms");
    let on = |text: &str, room: &str| {
        text.split(|c: char| !(c.is_alphanumeric() || c == '_'))
            .any(|word| word == room)
    };
    let missing: Vec<String> = rooms
        .iter()
        .flat_map(|room| {
            let mut missing = Vec::new();
            if !on(map, room) {
                missing.push(format!("{room} (docs/development.md)"));
            }
            if !on(&lib_doc, room) {
                missing.push(format!("{room} (src/lib.rs)"));
            }
            missing
        })
        .collect();
    assert!(
        missing.is_empty(),
        "rooms missing from the map: {missing:?}"
    );
}

#[test]
fn every_module_says_what_it_is() {
    let krate = Crate::read(&sources());
    let undocumented: Vec<String> = sources()
        .into_iter()
        .filter(|(file, _)| krate.named.contains_key(file))
        .filter(|(_, text)| !text.starts_with("//!"))
        .map(|(file, _)| file)
        .collect();
    assert!(
        undocumented.is_empty(),
        "modules without a //! paragraph first: {undocumented:?}"
    );
}

// ---------------------------------------------------------------------------------------
// The checker checks itself.

#[test]
fn the_checker_sees_a_cycle_and_comments_are_not_imports() {
    let mut graph = Graph::new();
    graph.insert("a".into(), ["b".into()].into());
    graph.insert("b".into(), ["c".into()].into());
    graph.insert("c".into(), ["a".into()].into());
    assert_eq!(
        find_cycle(&graph),
        Some(vec!["a".into(), "b".into(), "c".into(), "a".into()])
    );
    graph.insert("c".into(), BTreeSet::new());
    assert_eq!(find_cycle(&graph), None);
    let code = code_only(
        "use crate::x::Y; // crate::z\n//! see [`crate::w`]\n/* crate::v /* nested */ crate::u */\n\
         let v = crate::q::f(\"crate::s\", r#\"crate::t\"#, '\"', b'x');\nlet l: &'a str = crate::p::P;",
    );
    let inline: Vec<String> = inline_paths(&code).iter().map(|p| p.join("::")).collect();
    assert_eq!(inline, ["crate::q::f", "crate::p::P"]);
    let leaves = &use_declarations(&code)[0].1;
    assert_eq!(leaves[0].path, ["crate", "x", "Y"]);
}

#[test]
fn the_checker_reads_every_form_of_use() {
    let code = code_only(
        "pub use crate::{a, b::{c, d as e, self}, f::*};\n\
         pub(crate) use super::g::H;\nuse self::i::{j::{k}};\nuse std::fmt;",
    );
    let found = use_declarations(&code);
    let leaves = |n: usize| -> Vec<(String, Option<String>)> {
        found[n]
            .1
            .iter()
            .map(|l| (l.path.join("::"), l.name.clone()))
            .collect()
    };
    let named = |path: &str, name: Option<&str>| (path.to_owned(), name.map(str::to_owned));
    assert_eq!(
        leaves(0),
        [
            named("crate::a", Some("a")),
            named("crate::b::c", Some("c")),
            named("crate::b::d", Some("e")),
            named("crate::b", Some("b")),
            named("crate::f", None),
        ]
    );
    assert!(
        found[0].0 && found[1].0 && !found[2].0,
        "pub, pub(crate), private"
    );
    assert_eq!(leaves(1), [named("super::g::H", Some("H"))]);
    assert_eq!(leaves(2), [named("self::i::j::k", Some("k"))]);
    assert_eq!(leaves(3), [named("std::fmt", Some("fmt"))]);
}

#[test]
fn the_checker_follows_paths_to_files_and_sees_a_file_cycle() {
    let file = |path: &str, text: &str| (path.to_owned(), text.to_owned());
    let files = [
        file("lib.rs", "pub mod room; pub mod other;"),
        file(
            "room/mod.rs",
            "pub mod a;\npub mod b;\n#[cfg(test)]\nmod tests;\npub use self::a::A;\nuse b::B;",
        ),
        file("room/a.rs", "pub struct A;\nfn f() { crate::other::g(); }"),
        file("room/b.rs", "use super::A;\npub struct B;"),
        file("room/tests.rs", "use crate::room::b::B;"),
        file(
            "other.rs",
            "use crate::{room::{B as Renamed}};\npub fn g() {}\n#[cfg(test)]\nmod tests { use crate::room::a::A; }",
        ),
    ];
    let krate = Crate::read(&files);
    assert!(
        !krate.named.contains_key("room/tests.rs"),
        "test files are no rooms"
    );
    let graph = krate.file_graph();
    let edges = |f: &str| graph[f].iter().cloned().collect::<Vec<_>>();
    // `pub use self::a::A` re-exports; `use b::B` is a child path of a use declaration.
    assert_eq!(edges("room/mod.rs"), ["room/a.rs", "room/b.rs"]);
    // `super::A` is followed through the re-export to the file that defines it.
    assert_eq!(edges("room/b.rs"), ["room/a.rs"]);
    assert_eq!(edges("room/a.rs"), ["other.rs"]);
    // `crate::{room::{B as …}}` names room/mod.rs's B, which is b.rs's (not re-exported:
    // it stays mod.rs's); the cfg(test) module is not read.
    assert_eq!(edges("other.rs"), ["room/mod.rs"]);
    assert_eq!(
        find_cycle(&graph),
        Some(
            ["other.rs", "room/mod.rs", "room/a.rs", "other.rs"]
                .map(str::to_owned)
                .to_vec()
        )
    );
}
