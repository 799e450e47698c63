//! Integer ranges as grammar text: `minimum`/`maximum` become alternatives
//! over digit classes and digit counts (`[1-8] [0-9]{1,15} | [9] [0-9]{0,15}`
//! for "at least 9"), written the way llama.cpp writes them so the grammars
//! are the same text. Unbounded sides allow up to 16 digits, the reference's
//! limit.

use std::fmt::Write;

const UNBOUNDED: u32 = u32::MAX;

/// Writes the alternatives for integers in `[min, max]` to `out`
/// (`i64::MIN` / `i64::MAX` for an open side). At least one side is bounded.
pub(super) fn min_max_int(min: i64, max: i64, out: &mut String) {
    range(min, max, out, 16, true);
}

fn digit_range(out: &mut String, from: u8, to: u8) {
    if from == to {
        let _ = write!(out, "[{}]", from as char);
    } else {
        let _ = write!(out, "[{}-{}]", from as char, to as char);
    }
}

/// `[0-9]` repeated `min..=max` times (`max` may be `UNBOUNDED`).
fn more_digits(out: &mut String, min: u32, max: u32) {
    out.push_str("[0-9]");
    if min == max && min == 1 {
        return;
    }
    let _ = write!(out, "{{{min}");
    if max != min {
        out.push(',');
        if max != UNBOUNDED {
            let _ = write!(out, "{max}");
        }
    }
    out.push('}');
}

/// Numbers from `from` to `to` written with the same number of digits
/// (`from` ≤ `to`, both ASCII digit strings).
fn uniform_range(out: &mut String, from: &[u8], to: &[u8]) {
    let mut i = 0;
    while i < from.len() && i < to.len() && from[i] == to[i] {
        i += 1;
    }
    if i > 0 {
        let _ = write!(
            out,
            "\"{}\"",
            std::str::from_utf8(&from[..i]).unwrap_or_default()
        );
    }
    if i >= from.len() || i >= to.len() {
        return;
    }
    if i > 0 {
        out.push(' ');
    }
    let sub_len = from.len() - i - 1;
    if sub_len == 0 {
        let _ = write!(out, "[{}-{}]", from[i] as char, to[i] as char);
        return;
    }
    let (from_sub, to_sub) = (&from[i + 1..], &to[i + 1..]);
    let zeros = vec![b'0'; sub_len];
    let nines = vec![b'9'; sub_len];
    let mut to_reached = false;
    out.push('(');
    if from_sub == zeros.as_slice() {
        digit_range(out, from[i], to[i] - 1);
        out.push(' ');
        more_digits(out, sub_len as u32, sub_len as u32);
    } else {
        let _ = write!(out, "[{}] (", from[i] as char);
        uniform_range(out, from_sub, &nines);
        out.push(')');
        if from[i] < to[i] - 1 {
            out.push_str(" | ");
            if to_sub == nines.as_slice() {
                digit_range(out, from[i] + 1, to[i]);
                to_reached = true;
            } else {
                digit_range(out, from[i] + 1, to[i] - 1);
            }
            out.push(' ');
            more_digits(out, sub_len as u32, sub_len as u32);
        }
    }
    if !to_reached {
        out.push_str(" | ");
        digit_range(out, to[i], to[i]);
        out.push(' ');
        uniform_range(out, &zeros, to_sub);
    }
    out.push(')');
}

/// `top_level` is false inside a number whose leading digit is already
/// written, where leading zeros are allowed.
fn range(mut min: i64, max: i64, out: &mut String, decimals_left: u32, top_level: bool) {
    let has_min = min != i64::MIN;
    let has_max = max != i64::MAX;
    if has_min && has_max {
        if min < 0 && max < 0 {
            out.push_str("\"-\" (");
            range(
                max.wrapping_neg(),
                min.wrapping_neg(),
                out,
                decimals_left,
                true,
            );
            out.push(')');
            return;
        }
        if min < 0 {
            out.push_str("\"-\" (");
            range(0, min.wrapping_neg(), out, decimals_left, true);
            out.push_str(") | ");
            min = 0;
        }
        let mut min_s = min.to_string().into_bytes();
        let max_s = max.to_string().into_bytes();
        // One uniform range per digit count from min's to max's.
        for digits in min_s.len()..max_s.len() {
            uniform_range(out, &min_s, &vec![b'9'; digits]);
            min_s = std::iter::once(b'1')
                .chain(std::iter::repeat_n(b'0', digits))
                .collect();
            out.push_str(" | ");
        }
        uniform_range(out, &min_s, &max_s);
        return;
    }

    let less_decimals = decimals_left.saturating_sub(1).max(1);
    if has_min {
        if min < 0 {
            out.push_str("\"-\" (");
            range(i64::MIN, min.wrapping_neg(), out, decimals_left, false);
            out.push_str(") | [0] | [1-9] ");
            more_digits(out, 0, decimals_left - 1);
        } else if min == 0 {
            if top_level {
                out.push_str("[0] | [1-9] ");
                more_digits(out, 0, less_decimals);
            } else {
                more_digits(out, 1, decimals_left);
            }
        } else if min <= 9 {
            let c = b'0' + min as u8;
            let range_start = if top_level { b'1' } else { b'0' };
            if c > range_start {
                digit_range(out, range_start, c - 1);
                out.push(' ');
                more_digits(out, 1, less_decimals);
                out.push_str(" | ");
            }
            digit_range(out, c, b'9');
            out.push(' ');
            more_digits(out, 0, less_decimals);
        } else {
            let min_s = min.to_string().into_bytes();
            let len = min_s.len() as u32;
            let c = min_s[0];
            if c > b'1' {
                digit_range(out, if top_level { b'1' } else { b'0' }, c - 1);
                out.push(' ');
                more_digits(out, len, less_decimals);
                out.push_str(" | ");
            }
            digit_range(out, c, c);
            out.push_str(" (");
            let rest: i64 = std::str::from_utf8(&min_s[1..])
                .ok()
                .and_then(|s| s.parse().ok())
                .unwrap_or(0);
            range(rest, i64::MAX, out, less_decimals, false);
            out.push(')');
            if c < b'9' {
                out.push_str(" | ");
                digit_range(out, c + 1, b'9');
                out.push(' ');
                more_digits(out, len - 1, less_decimals);
            }
        }
        return;
    }

    // Only a maximum.
    if max >= 0 {
        if top_level {
            out.push_str("\"-\" [1-9] ");
            more_digits(out, 0, less_decimals);
            out.push_str(" | ");
        }
        range(0, max, out, decimals_left, true);
    } else {
        out.push_str("\"-\" (");
        range(max.wrapping_neg(), i64::MAX, out, decimals_left, false);
        out.push(')');
    }
}
