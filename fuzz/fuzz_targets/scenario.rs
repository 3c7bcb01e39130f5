//! Fuzzes the scenario parser and the compile stage's checks (files holding one scenario or a
//! list, sweeps included): they must return compiled scenarios or an error, never panic and never
//! allocate without bound (libFuzzer's `-malloc_limit_mb` turns a huge allocation into a crash).
//! The run's admission (the estimate of a batch's events and memory) is not fuzzed per input: it
//! is arithmetic on a compiled scenario, covered by the hostile corpus (`sim/tests/hostile/`).
//!
//! Two kinds of input, picked by the first byte:
//! - raw text, mutated byte-wise by libFuzzer (seeded with the shipped scenarios, plus a dictionary of
//!   RON tokens and field names in `scenario.dict`);
//! - an edit script applied to a shipped scenario: replace the n-th number with an extreme value,
//!   delete or duplicate the n-th line, cut the text, swap two lines. These keep most of the file
//!   well-formed, so the fuzzer reaches the validator's semantic checks, not only the syntax errors.
#![no_main]

use libfuzzer_sys::fuzz_target;

const SHIPPED: &[&str] = &[
    include_str!("../../scenarios/default.ron"),
    // A list of scenarios with drawn timeouts, and a scenario with a sweep.
    include_str!("../../scenarios/outage-amplification.ron"),
    include_str!("../../scenarios/failure-rate-sweep.ron"),
];

const EXTREMES: &[&str] = &[
    "0",
    "-1",
    "1e308",
    "-1e308",
    "NaN",
    "inf",
    "4294967296",
    "18446744073709551616",
    "0.0",
    "1e-300",
    "\"0s\"",
    "\"584y\"",
    "\"99999999999h\"",
    "\"\"",
    "\"-1s\"",
    "None",
    "[]",
    "()",
    "\"x\"",
];

/// Most edits applied to one input: each re-reads the whole text, so an unbounded script (up to
/// libFuzzer's 4 KiB inputs, 1365 edits) would spend the run in the harness rather than in the
/// parser and checks; a few edits per input reach every check, and libFuzzer keeps mutating.
const MAX_EDITS: usize = 8;

fn edit(base: &str, script: &[u8]) -> String {
    let mut text = base.to_owned();
    for op in script.chunks(3).take(MAX_EDITS) {
        let [kind, a, b] = [op[0], *op.get(1).unwrap_or(&0), *op.get(2).unwrap_or(&0)];
        let lines: Vec<&str> = text.lines().collect();
        if lines.is_empty() {
            break;
        }
        let n = usize::from(a) * 256 + usize::from(b);
        text = match kind % 5 {
            0 => {
                // Replace the n-th number-like token with an extreme value.
                let spans: Vec<(usize, usize)> = number_spans(&text);
                match spans.get(n % spans.len().max(1)) {
                    Some(&(s, e)) => {
                        let with = EXTREMES[usize::from(b) % EXTREMES.len()];
                        format!("{}{}{}", &text[..s], with, &text[e..])
                    }
                    None => text,
                }
            }
            1 => lines
                .iter()
                .enumerate()
                .filter(|(i, _)| *i != n % lines.len())
                .map(|(_, l)| *l)
                .collect::<Vec<_>>()
                .join("\n"),
            2 => {
                let i = n % lines.len();
                let mut v = lines.clone();
                v.insert(i, lines[i]);
                v.join("\n")
            }
            3 => {
                let cut = n % (text.len() + 1);
                let cut = (0..=cut)
                    .rev()
                    .find(|&c| text.is_char_boundary(c))
                    .unwrap_or(0);
                text[..cut].to_owned()
            }
            _ => {
                let (i, j) = (usize::from(a) % lines.len(), usize::from(b) % lines.len());
                let mut v = lines.clone();
                v.swap(i, j);
                v.join("\n")
            }
        };
    }
    text
}

/// Byte spans of numbers and quoted strings in `text`.
fn number_spans(text: &str) -> Vec<(usize, usize)> {
    let bytes = text.as_bytes();
    let mut spans = Vec::new();
    let mut i = 0;
    while i < bytes.len() {
        if bytes[i] == b'"' {
            let start = i;
            i += 1;
            while i < bytes.len() && bytes[i] != b'"' {
                i += 1;
            }
            spans.push((start, (i + 1).min(bytes.len())));
        } else if bytes[i].is_ascii_digit() {
            let start = i;
            while i < bytes.len() && (bytes[i].is_ascii_digit() || bytes[i] == b'.') {
                i += 1;
            }
            spans.push((start, i));
            continue;
        }
        i += 1;
    }
    spans
}

/// The shipped scenarios without their full-line comments (the long comment blocks at the top): edits
/// then land on lines that matter, and each run parses less text.
fn bases() -> &'static [String] {
    static BASES: std::sync::OnceLock<Vec<String>> = std::sync::OnceLock::new();
    BASES.get_or_init(|| {
        SHIPPED
            .iter()
            .map(|text| {
                text.lines()
                    .filter(|l| !l.trim_start().starts_with("//"))
                    .collect::<Vec<_>>()
                    .join("\n")
            })
            .collect()
    })
}

fuzz_target!(|data: &[u8]| {
    let Some((&mode, rest)) = data.split_first() else {
        return;
    };
    let text = if mode % 4 == 0 {
        String::from_utf8_lossy(rest).into_owned()
    } else {
        let bases = bases();
        edit(&bases[usize::from(mode / 4) % bases.len()], rest)
    };
    match sim::compile::compile_all(&text, "fuzz.ron", &sim::compile::Limits::default()) {
        Ok(scenarios) => drop(scenarios),
        Err(e) => {
            // Every error names the file.
            assert!(
                e.to_string().contains("fuzz.ron"),
                "error without the file name: {e}"
            );
        }
    }
});
