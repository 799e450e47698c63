//! Stop strings over streamed text: text is released only once it cannot be
//! the start of a stop string, so a stop string split across tokens is never
//! emitted, and the text before it is.

#[derive(Debug)]
pub struct StopMatcher {
    stops: Vec<String>,
    text: String,
    /// Bytes of `text` already released.
    sent: usize,
}

/// What one push produced.
#[derive(Debug, PartialEq)]
pub enum Step {
    /// Text that is safe to emit now (maybe empty).
    Emit(String),
    /// A stop string matched: the text before it that was not yet emitted,
    /// and the stop string.
    Stop(String, String),
}

impl StopMatcher {
    pub fn new(stops: &[String]) -> StopMatcher {
        StopMatcher {
            stops: stops.iter().filter(|s| !s.is_empty()).cloned().collect(),
            text: String::new(),
            sent: 0,
        }
    }

    /// All text so far, up to the stop string once one matched.
    pub fn text(&self) -> &str {
        &self.text
    }

    pub fn push(&mut self, piece: &str) -> Step {
        self.text.push_str(piece);
        // A match must end in unreleased text; it can start at most
        // `len - 1` bytes before it.
        let earliest = self
            .stops
            .iter()
            .filter_map(|stop| {
                let mut from = self.sent.saturating_sub(stop.len() - 1);
                while !self.text.is_char_boundary(from) {
                    from -= 1;
                }
                self.text[from..]
                    .find(stop.as_str())
                    .map(|at| (from + at, stop))
            })
            .min_by_key(|(at, _)| *at);
        if let Some((at, stop)) = earliest {
            let stop = stop.clone();
            let before = self.text[self.sent.min(at)..at].to_string();
            self.text.truncate(at);
            self.sent = at;
            return Step::Stop(before, stop);
        }
        let hold = self.partial_suffix();
        let end = self.text.len() - hold;
        let out = self.text[self.sent..end].to_string();
        self.sent = end;
        Step::Emit(out)
    }

    /// The longest tail of the text that begins some stop string.
    fn partial_suffix(&self) -> usize {
        let unsent = &self.text[self.sent..];
        self.stops
            .iter()
            .flat_map(|stop| {
                stop.char_indices()
                    .skip(1)
                    .map(|(i, _)| &stop[..i])
                    .filter(|prefix| unsent.ends_with(prefix))
                    .map(|prefix| prefix.len())
            })
            .max()
            .unwrap_or(0)
    }

    /// The held-back tail, released at the end of generation.
    pub fn finish(&mut self) -> String {
        let out = self.text[self.sent..].to_string();
        self.sent = self.text.len();
        out
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    #[cfg(target_family = "wasm")]
    use wasm_bindgen_test::wasm_bindgen_test as test;

    fn run(stops: &[&str], pieces: &[&str]) -> (String, Option<String>) {
        let stops: Vec<String> = stops.iter().map(|s| s.to_string()).collect();
        let mut m = StopMatcher::new(&stops);
        let mut out = String::new();
        for p in pieces {
            match m.push(p) {
                Step::Emit(t) => out.push_str(&t),
                Step::Stop(t, s) => {
                    out.push_str(&t);
                    assert_eq!(m.text(), out);
                    return (out, Some(s));
                }
            }
        }
        out.push_str(&m.finish());
        (out, None)
    }

    #[test]
    fn a_stop_split_across_pieces_is_never_emitted() {
        assert_eq!(
            run(&["</end>"], &["Hello", " wor", "ld</", "en", "d> more"]),
            ("Hello world".into(), Some("</end>".into()))
        );
    }

    #[test]
    fn held_text_that_does_not_become_a_stop_is_released() {
        let stops: Vec<String> = vec!["STOP".into()];
        let mut m = StopMatcher::new(&stops);
        assert_eq!(m.push("a ST"), Step::Emit("a ".into()));
        assert_eq!(m.push("x"), Step::Emit("STx".into()));
        assert_eq!(m.push("ST"), Step::Emit("".into()));
        assert_eq!(m.finish(), "ST");
    }

    #[test]
    fn the_earliest_of_several_stops_wins() {
        assert_eq!(
            run(&["bb", "abc"], &["xxab", "cbb"]),
            ("xx".into(), Some("abc".into()))
        );
        assert_eq!(run(&[], &["abc"]), ("abc".into(), None));
    }

    #[test]
    fn multibyte_stops_and_text() {
        assert_eq!(
            run(&["é!"], &["caf", "é", "é", "!x"]),
            ("café".into(), Some("é!".into()))
        );
    }
}
