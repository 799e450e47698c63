//! The date behind templates' `strftime_now(format)` (Llama 3.x and gpt-oss
//! write today's date into the system header): the current UTC time, or a
//! fixed one so that renders are reproducible, formatted like C's `strftime`
//! for the directives templates use.

/// Seconds since 1970-01-01T00:00:00Z, now.
#[cfg(not(target_family = "wasm"))]
pub fn unix_now() -> i64 {
    match std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH) {
        Ok(d) => d.as_secs() as i64,
        Err(e) => -(e.duration().as_secs() as i64),
    }
}

/// wasm32-unknown-unknown has no system clock (`SystemTime::now` panics
/// there): ask JavaScript's `Date`.
#[cfg(target_family = "wasm")]
pub fn unix_now() -> i64 {
    (js_sys::Date::now() / 1000.0).floor() as i64
}

const MONTHS: [&str; 12] = [
    "January",
    "February",
    "March",
    "April",
    "May",
    "June",
    "July",
    "August",
    "September",
    "October",
    "November",
    "December",
];
const WEEKDAYS: [&str; 7] = [
    "Monday",
    "Tuesday",
    "Wednesday",
    "Thursday",
    "Friday",
    "Saturday",
    "Sunday",
];

/// A UTC calendar time split into its fields.
struct Civil {
    year: i64,
    /// 1..=12
    month: u32,
    /// 1..=31
    day: u32,
    hour: u32,
    minute: u32,
    second: u32,
    /// 0 = Monday
    weekday: usize,
    /// 1..=366
    day_of_year: u32,
}

impl Civil {
    fn from_unix(secs: i64) -> Civil {
        let days = secs.div_euclid(86_400);
        let rem = secs.rem_euclid(86_400) as u32;
        let (year, month, day) = civil_from_days(days);
        let jan1 = days_from_civil(year, 1, 1);
        Civil {
            year,
            month,
            day,
            hour: rem / 3600,
            minute: rem / 60 % 60,
            second: rem % 60,
            // 1970-01-01 was a Thursday (3 with Monday = 0).
            weekday: (days + 3).rem_euclid(7) as usize,
            day_of_year: (days - jan1 + 1) as u32,
        }
    }
}

/// Year, month and day of a count of days since 1970-01-01 (proleptic
/// Gregorian calendar; eras of 400 years repeat exactly).
fn civil_from_days(days: i64) -> (i64, u32, u32) {
    let z = days + 719_468; // days since 0000-03-01
    let era = z.div_euclid(146_097);
    let doe = z.rem_euclid(146_097); // day of era, 0..146096
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365; // 0..399
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100); // day of year from March 1st
    let mp = (5 * doy + 2) / 153; // month from March = 0
    let day = (doy - (153 * mp + 2) / 5 + 1) as u32;
    let month = if mp < 10 { mp + 3 } else { mp - 9 } as u32;
    let year = yoe + era * 400 + i64::from(month <= 2);
    (year, month, day)
}

/// The inverse of `civil_from_days`.
fn days_from_civil(year: i64, month: u32, day: u32) -> i64 {
    let y = if month <= 2 { year - 1 } else { year };
    let era = y.div_euclid(400);
    let yoe = y.rem_euclid(400);
    let m = i64::from(month);
    let doy = (153 * (if m > 2 { m - 3 } else { m + 9 }) + 2) / 5 + i64::from(day) - 1;
    let doe = yoe * 365 + yoe / 4 - yoe / 100 + doy;
    era * 146_097 + doe - 719_468
}

/// `format` with C/Python `strftime` directives replaced by the fields of
/// `unix_seconds` (UTC, C locale). Supported: %a %A %b %B %d %e %H %I %j %m %M
/// %p %S %y %Y %F %T %%; any other directive is copied as written.
pub fn strftime(format: &str, unix_seconds: i64) -> String {
    let t = Civil::from_unix(unix_seconds);
    let mut out = String::with_capacity(format.len() + 16);
    let mut chars = format.chars();
    while let Some(c) = chars.next() {
        if c != '%' {
            out.push(c);
            continue;
        }
        let Some(d) = chars.next() else {
            out.push('%');
            break;
        };
        let hour12 = if t.hour % 12 == 0 { 12 } else { t.hour % 12 };
        match d {
            'a' => out.push_str(&WEEKDAYS[t.weekday][..3]),
            'A' => out.push_str(WEEKDAYS[t.weekday]),
            'b' | 'h' => out.push_str(&MONTHS[t.month as usize - 1][..3]),
            'B' => out.push_str(MONTHS[t.month as usize - 1]),
            'd' => out.push_str(&format!("{:02}", t.day)),
            'e' => out.push_str(&format!("{:2}", t.day)),
            'H' => out.push_str(&format!("{:02}", t.hour)),
            'I' => out.push_str(&format!("{hour12:02}")),
            'j' => out.push_str(&format!("{:03}", t.day_of_year)),
            'm' => out.push_str(&format!("{:02}", t.month)),
            'M' => out.push_str(&format!("{:02}", t.minute)),
            'p' => out.push_str(if t.hour < 12 { "AM" } else { "PM" }),
            'S' => out.push_str(&format!("{:02}", t.second)),
            'y' => out.push_str(&format!("{:02}", t.year.rem_euclid(100))),
            'Y' => out.push_str(&t.year.to_string()),
            'F' => out.push_str(&format!("{}-{:02}-{:02}", t.year, t.month, t.day)),
            'T' => out.push_str(&format!("{:02}:{:02}:{:02}", t.hour, t.minute, t.second)),
            '%' => out.push('%'),
            other => {
                out.push('%');
                out.push(other);
            }
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    #[cfg(target_family = "wasm")]
    use wasm_bindgen_test::wasm_bindgen_test as test;

    #[test]
    fn formats_known_dates() {
        // 2025-07-26T13:45:07Z, a Saturday, day 207 of the year.
        let t = 1_753_537_507;
        assert_eq!(strftime("%d %b %Y", t), "26 Jul 2025");
        assert_eq!(strftime("%d %B %Y", t), "26 July 2025");
        assert_eq!(strftime("%Y-%m-%d", t), "2025-07-26");
        assert_eq!(
            strftime("%a %A %j %H:%M:%S %I%p %y %%", t),
            "Sat Saturday 207 13:45:07 01PM 25 %"
        );
        assert_eq!(strftime("%F %T %Q", 0), "1970-01-01 00:00:00 %Q");
        // Leap day and a date before 1970.
        assert_eq!(strftime("%F %a", 951_782_400), "2000-02-29 Tue");
        assert_eq!(strftime("%F %T", -1), "1969-12-31 23:59:59");
    }

    #[test]
    fn days_round_trip() {
        for days in (-800_000..800_000).step_by(997) {
            let (y, m, d) = civil_from_days(days);
            assert_eq!(days_from_civil(y, m, d), days);
        }
    }
}
