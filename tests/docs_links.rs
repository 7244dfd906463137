//! Every relative link in `README.md` and `docs/*.md` resolves: the file (or directory)
//! exists, and a `file.md#anchor` or `#anchor` link names a heading of that page under
//! GitHub's slug rules (lower-case; punctuation dropped except `-` and `_`; spaces become
//! `-`; a repeated heading gets `-1`, `-2`, …). Links inside fenced code blocks and
//! inline code are not links; links with a scheme (`https:`, `mailto:`) are not checked.

use std::collections::HashSet;
use std::fs;
use std::path::{Path, PathBuf};

/// The repository root (this crate's manifest directory).
fn repo_root() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
}

/// `README.md` and every `docs/*.md`, sorted.
fn markdown_files(root: &Path) -> Vec<PathBuf> {
    let mut files = vec![root.join("README.md")];
    let mut docs: Vec<PathBuf> = fs::read_dir(root.join("docs"))
        .expect("docs/ exists")
        .map(|entry| entry.expect("docs/ is readable").path())
        .filter(|path| path.extension().is_some_and(|ext| ext == "md"))
        .collect();
    docs.sort();
    files.extend(docs);
    files
}

/// GitHub's anchor for a heading's text.
fn github_slug(heading: &str) -> String {
    heading
        .trim()
        .to_lowercase()
        .chars()
        .filter(|c| c.is_alphanumeric() || matches!(c, ' ' | '-' | '_'))
        .map(|c| if c == ' ' { '-' } else { c })
        .collect()
}

/// The lines of `text` outside fenced code blocks, numbered from 1.
fn prose_lines(text: &str) -> Vec<(usize, &str)> {
    let mut fence: Option<String> = None;
    let mut lines = Vec::new();
    for (n, line) in text.lines().enumerate() {
        let trimmed = line.trim_start();
        let marker: String = trimmed
            .chars()
            .take_while(|c| *c == '`' || *c == '~')
            .collect();
        let first = marker.chars().next();
        let is_fence = marker.len() >= 3 && marker.chars().all(|c| Some(c) == first);
        match &fence {
            None if is_fence => fence = Some(marker),
            Some(open) if is_fence && marker.starts_with(open.as_str()) => fence = None,
            Some(_) => {}
            None => lines.push((n + 1, line)),
        }
    }
    lines
}

/// The anchors of every heading of `text` (ATX headings outside code blocks).
fn anchors(text: &str) -> HashSet<String> {
    let mut seen: Vec<String> = Vec::new();
    let mut anchors = HashSet::new();
    for (_, line) in prose_lines(text) {
        let hashes = line.chars().take_while(|c| *c == '#').count();
        if !(1..=6).contains(&hashes) || !line[hashes..].starts_with(' ') {
            continue;
        }
        let title = line[hashes..].trim().trim_end_matches('#').trim();
        let slug = github_slug(title);
        let repeats = seen.iter().filter(|s| **s == slug).count();
        anchors.insert(if repeats == 0 {
            slug.clone()
        } else {
            format!("{slug}-{repeats}")
        });
        seen.push(slug);
    }
    anchors
}

/// `line` without its inline code spans.
fn without_inline_code(line: &str) -> String {
    let mut out = String::new();
    let mut in_code = false;
    for part in line.split('`') {
        if !in_code {
            out.push_str(part);
        }
        in_code = !in_code;
    }
    out
}

/// Every link target of `text` with its line: inline links `[text](target)` (images
/// too) and reference definitions `[label]: target`.
fn link_targets(text: &str) -> Vec<(usize, String)> {
    let mut targets = Vec::new();
    for (n, line) in prose_lines(text) {
        let line = without_inline_code(line);
        let mut rest = line.as_str();
        while let Some(at) = rest.find("](") {
            let after = &rest[at + 2..];
            let end = after
                .find(|c: char| c == ')' || c.is_whitespace())
                .unwrap_or(after.len());
            targets.push((n, after[..end].to_owned()));
            rest = &after[end..];
        }
        let trimmed = line.trim_start();
        if trimmed.starts_with('[')
            && let Some(at) = trimmed.find("]: ")
        {
            let target = trimmed[at + 3..].split_whitespace().next().unwrap_or("");
            targets.push((n, target.to_owned()));
        }
    }
    targets
}

/// True for `https://…`, `mailto:…` and the like (not checked).
fn has_scheme(target: &str) -> bool {
    match target.find(':') {
        Some(colon) => !target[..colon].contains(['/', '#', '.']),
        None => false,
    }
}

/// The broken links of the page at `path` whose text is `text`, one line each.
fn broken_links(path: &Path, text: &str) -> Vec<String> {
    let dir = path.parent().expect("a page has a directory");
    let mut broken = Vec::new();
    for (line, target) in link_targets(text) {
        if target.is_empty() || has_scheme(&target) {
            continue;
        }
        let (file, anchor) = match target.split_once('#') {
            Some((file, anchor)) => (file, Some(anchor)),
            None => (target.as_str(), None),
        };
        let place = format!("{}:{line}: {target}", path.display());
        let page_anchors = if file.is_empty() {
            anchors(text)
        } else {
            let resolved = dir.join(file);
            if !resolved.exists() {
                broken.push(format!("{place} — no file {}", resolved.display()));
                continue;
            }
            match anchor {
                Some(_) if file.ends_with(".md") => {
                    anchors(&fs::read_to_string(&resolved).expect("a linked page is readable"))
                }
                _ => continue,
            }
        };
        if let Some(anchor) = anchor
            && !page_anchors.contains(anchor)
        {
            broken.push(format!("{place} — no heading with the anchor #{anchor}"));
        }
    }
    broken
}

#[test]
fn every_relative_link_in_the_readme_and_docs_resolves() {
    let root = repo_root();
    let files = markdown_files(&root);
    assert!(files.len() > 1, "no pages under docs/");
    let mut broken = Vec::new();
    for file in &files {
        let text = fs::read_to_string(file).expect("the page is readable");
        broken.extend(broken_links(file, &text));
    }
    assert!(
        broken.is_empty(),
        "{} broken link(s):\n{}",
        broken.len(),
        broken.join("\n")
    );
}

#[test]
fn slugs_follow_githubs_rules() {
    assert_eq!(github_slug("On AWS: S3 + DynamoDB"), "on-aws-s3--dynamodb");
    assert_eq!(
        github_slug("Reading it back: latest state per key (DuckDB)"),
        "reading-it-back-latest-state-per-key-duckdb"
    );
    assert_eq!(github_slug("`server_id`"), "server_id");
    assert_eq!(github_slug("MySQL / MariaDB"), "mysql--mariadb");
    let text = "# Title\n\n## Notes\n\n```sh\n# not a heading\n```\n\n## Notes\n";
    let found = anchors(text);
    for anchor in ["title", "notes", "notes-1"] {
        assert!(found.contains(anchor), "{anchor} missing from {found:?}");
    }
    assert!(!found.contains("not-a-heading"));
}

#[test]
fn broken_links_are_reported() {
    let readme = repo_root().join("README.md");
    let text = "# Page\n\
        [fine](#page) [fine](docs/state.md#guarantees) [web](https://example.com/x#y)\n\
        [no file](docs/no-such-page.md) [no heading](docs/state.md#no-such-heading)\n\
        [no local heading](#nowhere) `[code](docs/ignored.md)`\n\
        ```\n[fenced](docs/ignored.md)\n```\n";
    let broken = broken_links(&readme, text);
    assert_eq!(broken.len(), 3, "{broken:#?}");
    assert!(
        broken[0].contains("docs/no-such-page.md — no file"),
        "{}",
        broken[0]
    );
    assert!(broken[1].contains("#no-such-heading"), "{}", broken[1]);
    assert!(broken[2].contains("#nowhere"), "{}", broken[2]);
}

#[test]
fn every_error_code_has_a_row_with_its_class_in_the_operations_table() {
    let text = std::fs::read_to_string(repo_root().join("docs/operations.md")).unwrap();
    let mut missing = Vec::new();
    for code in sluice::error::Code::ALL {
        let class = match code.class() {
            sluice::error::Class::Config => "config (1)",
            sluice::error::Class::Transient => "transient (3)",
            sluice::error::Class::Refusal => "refusal (5)",
        };
        let row = format!("| `{}` | {class} |", code.as_str());
        if !text.contains(&row) {
            missing.push(row);
        }
    }
    assert!(
        missing.is_empty(),
        "docs/operations.md lacks the rows {missing:#?}"
    );
}
