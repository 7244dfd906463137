//! Running `sluice drain --stdout` the way a user does: its stdout is a real pipe into a
//! reader process (python, jq), its stderr collected apart.

use std::io::Read;
use std::process::{Command, Stdio};

use super::{Job, Run};

/// A Python interpreter for pipe readers: the readers venv's when set up, else `python3`.
pub fn python() -> String {
    std::env::var("SLUICE_TEST_READERS_PYTHON").unwrap_or_else(|_| "python3".to_owned())
}

/// A reader that parses every line of its stdin as JSON (failing on any other line) and
/// prints them back as one JSON array.
pub const PARSE_EVERY_LINE: &str = "import json, sys\n\
lines = [json.loads(l) for l in sys.stdin]\n\
assert all(isinstance(l, dict) for l in lines), lines\n\
print(json.dumps(lines))\n";

/// What a drain into a pipe left: sluice's exit code and stderr (its stdout went into
/// the pipe), and the reader's exit code and stdout.
pub struct Piped {
    pub sluice: Run,
    pub reader_code: i32,
    pub reader_out: String,
}

impl Piped {
    /// The reader's stdout as JSON ([`PARSE_EVERY_LINE`]'s array).
    pub fn lines(&self) -> Vec<serde_json::Value> {
        assert_eq!(
            self.reader_code, 0,
            "the reader failed: {}",
            self.reader_out
        );
        serde_json::from_str(&self.reader_out)
            .unwrap_or_else(|e| panic!("{e}: {}", self.reader_out))
    }

    /// The run summary: the last stderr line that is a JSON object.
    pub fn summary(&self) -> serde_json::Value {
        self.sluice
            .stderr
            .lines()
            .rev()
            .find_map(|l| serde_json::from_str::<serde_json::Value>(l).ok())
            .filter(serde_json::Value::is_object)
            .unwrap_or_else(|| panic!("no summary on stderr:\n{}", self.sluice.stderr))
    }
}

impl Job {
    /// Runs `sluice <args>` with its stdout piped into `reader`, and waits for both.
    pub fn piped(&self, args: &[&str], env: &[(&str, &str)], mut reader: Command) -> Piped {
        let mut sluice = self
            .command(args, env)
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .unwrap();
        let pipe = sluice.stdout.take().unwrap();
        let reading = reader
            .stdin(Stdio::from(pipe))
            .stdout(Stdio::piped())
            .stderr(Stdio::inherit())
            .spawn()
            .unwrap();
        // The command keeps the pipe's read end open until it is dropped: a reader that
        // exits must leave the pipe without a reader.
        drop(reader);
        let reader = reading;
        let reading = std::thread::spawn(move || reader.wait_with_output().unwrap());
        let mut stderr = String::new();
        sluice
            .stderr
            .take()
            .unwrap()
            .read_to_string(&mut stderr)
            .unwrap();
        let status = sluice.wait().unwrap();
        let read = reading.join().unwrap();
        Piped {
            sluice: Run {
                code: status.code().unwrap_or(-1),
                stdout: String::new(),
                stderr,
            },
            reader_code: read.status.code().unwrap_or(-1),
            reader_out: String::from_utf8_lossy(&read.stdout).into_owned(),
        }
    }

    /// `sluice drain --stdout` piped into a Python reader running `script`.
    pub fn drain_into_python(&self, script: &str, env: &[(&str, &str)]) -> Piped {
        let mut reader = Command::new(python());
        reader.arg("-c").arg(script);
        self.piped(&["drain", "--stdout"], env, reader)
    }
}

impl Job {
    /// Rewrites the config's `destination:` line to `{ type: stdout }`.
    pub fn use_stdout_destination(&self) {
        let yaml = std::fs::read_to_string(&self.config).unwrap();
        let start = yaml.find("destination:").expect("a destination line");
        let end = start + yaml[start..].find('\n').unwrap();
        let yaml = format!(
            "{}destination: {{ type: stdout }}{}",
            &yaml[..start],
            &yaml[end..]
        );
        std::fs::write(&self.config, yaml).unwrap();
    }
}
